#include "common/contract/gvirtus_properties.h"

#include <nlohmann/json.hpp>

#include "common/net/ipv4_resolver.h"

namespace gvirtus {

const std::vector<std::string>& defaultPlugins() {
  static const std::vector<std::string> plugins = {"cudart", "cublas",   "curand",   "cudnn",
                                                   "cufft",  "cusolver", "cusparse", "nvrtc",
                                                   "cuda",   "nvml"};
  return plugins;
}

Result<std::string> renderProperties(const std::string& ipv4, int port,
                                     const std::vector<std::string>& plugins) {
  if (!isDottedIpv4(ipv4)) {
    return fail("GVirtuS server_address \"" + ipv4 + "\" is not a dotted IPv4 address");
  }
  if (port < 1 || port > 65535) {
    return fail("GVirtuS port " + std::to_string(port) + " is not between 1 and 65535");
  }
  // Ordered, so the file reads as GVirtuS's own examples do.
  nlohmann::ordered_json endpoint = {{"suite", "tcp/ip"},
                                     {"protocol", "tcp"},
                                     {"server_address", ipv4},
                                     {"port", std::to_string(port)}};
  nlohmann::ordered_json communicator = {{"endpoint", endpoint}, {"plugins", plugins}};
  nlohmann::ordered_json properties = {
      {"communicator", nlohmann::ordered_json::array({communicator})},
      {"secure_application", false}};
  return properties.dump();
}

PropertiesCache::PropertiesCache(std::vector<std::string> plugins) : plugins_(std::move(plugins)) {}

Result<std::string> PropertiesCache::forBackend(const std::string& ipv4, int port) {
  std::lock_guard lock(mutex_);
  auto key = std::pair{ipv4, port};
  if (auto it = rendered_.find(key); it != rendered_.end()) {
    return it->second;
  }
  auto text = renderProperties(ipv4, port, plugins_);
  if (!text) {
    return text;
  }
  if (rendered_.size() >= 1024) {
    rendered_.clear();  // backends come and go with their pod IPs
  }
  rendered_.emplace(std::move(key), *text);
  return text;
}

}  // namespace gvirtus
