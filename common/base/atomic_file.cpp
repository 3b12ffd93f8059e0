#include "common/base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "common/base/unique_fd.h"

namespace gvirtus {
namespace {

std::string errnoText(const std::string& what) {
  return what + ": " + std::strerror(errno);
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

std::string readWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  return in ? content.str() : std::string();
}

Result<bool> writeFileAtomically(const std::filesystem::path& path, std::string_view content,
                                 mode_t mode) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return fail("create " + dir.string() + ": " + ec.message());
  }
  if (std::filesystem::is_regular_file(path, ec) && readWholeFile(path) == content) {
    return false;
  }
  std::string temp = (dir / ("." + path.filename().string() + ".XXXXXX")).string();
  UniqueFd fd(::mkostemp(temp.data(), O_CLOEXEC));
  if (!fd.valid()) {
    return fail(errnoText("create a temporary file in " + dir.string()));
  }
  auto written = writeAll(fd.get(), content);
  if (written && ::fchmod(fd.get(), mode) != 0) {
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
  return true;
}

}  // namespace gvirtus
