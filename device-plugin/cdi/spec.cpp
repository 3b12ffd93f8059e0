#include "device-plugin/cdi/spec.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/base/atomic_file.h"

namespace gvirtus::device_plugin {

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
  if (auto written = writeFileAtomically(path, renderCdiSpec(ids)); !written) {
    return fail(written.error());
  }
  return path;
}

}  // namespace gvirtus::device_plugin
