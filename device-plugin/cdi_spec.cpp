#include "device-plugin/cdi_spec.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/unique_fd.h"

namespace gvirtus::device_plugin {
namespace {

std::string errnoText(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  return in ? content.str() : std::string();
}

Result<void> writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return fail(errnoText("write"));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

// Makes a rename in `dir` durable.
void syncDirectory(const std::filesystem::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.valid()) {
    ::fsync(fd.get());
  }
}

}  // namespace

std::string cdiDeviceName(std::string_view id) {
  return std::string(kCdiKind) + "=" + std::string(id);
}

std::string cdiDeviceEnv(std::string_view id) {
  std::string name = "GVIRTUS_";
  for (unsigned char c : id) {
    name += std::isalnum(c) != 0 ? static_cast<char>(std::toupper(c)) : '_';
  }
  return name + "=" + std::string(id);
}

std::string renderCdiSpec(const std::vector<std::string>& ids) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& id : ids) {
    devices.push_back({{"name", id}, {"containerEdits", {{"env", {cdiDeviceEnv(id)}}}}});
  }
  const nlohmann::json spec = {
      {"cdiVersion", kCdiVersion}, {"kind", kCdiKind}, {"devices", std::move(devices)}};
  return spec.dump(2) + "\n";
}

Result<std::filesystem::path> writeCdiSpec(const std::filesystem::path& dir,
                                           const std::vector<std::string>& ids) {
  const std::filesystem::path path = dir / kCdiSpecFileName;
  const std::string content = renderCdiSpec(ids);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return fail("create " + dir.string() + ": " + ec.message());
  }
  if (readFile(path) == content) {
    return path;
  }
  // Not ending in .json or .yaml, so that CDI caches scanning the folder skip it.
  std::string temp = (dir / ("." + std::string(kCdiSpecFileName) + ".XXXXXX")).string();
  UniqueFd fd(::mkostemp(temp.data(), O_CLOEXEC));
  if (!fd.valid()) {
    return fail(errnoText("create a temporary file in " + dir.string()));
  }
  auto written = writeAll(fd.get(), content);
  if (written && ::fchmod(fd.get(), 0644) != 0) {
    written = fail(errnoText("chmod"));
  }
  if (written && ::fsync(fd.get()) != 0) {
    written = fail(errnoText("fsync"));
  }
  if (written && fd.close() != 0) {
    written = fail(errnoText("close"));
  }
  if (written && ::rename(temp.c_str(), path.c_str()) != 0) {
    written = fail(errnoText("rename to " + path.string()));
  }
  if (!written) {
    ::unlink(temp.c_str());
    return fail(written.error().context("write " + temp));
  }
  syncDirectory(dir);
  return path;
}

}  // namespace gvirtus::device_plugin
