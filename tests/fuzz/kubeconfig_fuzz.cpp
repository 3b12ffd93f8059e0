// The kubeconfig loader (yaml-cpp underneath): any text loads or is refused with a
// message, never a crash. File references point into a folder that does not exist.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/kube/access/config.h"
#include "common/telemetry/log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    gvirtus::log::configure(gvirtus::log::Level::Error, gvirtus::log::Format::Text);
    return true;
  }();
  (void)quiet;
  auto config = gvirtus::parseKubeconfigText(
      std::string_view(reinterpret_cast<const char*>(data), size), "/nonexistent-gvirtus-fuzz");
  if (!config && config.error().message.empty()) {
    std::abort();
  }
  return 0;
}
