#include "webhook/gvirtus_properties.h"

#include <nlohmann/json.hpp>

#include "common/ipv4_resolver.h"

namespace gvirtus::webhook {

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

}  // namespace gvirtus::webhook
