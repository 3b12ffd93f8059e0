// The gpu-scheduling-map annotation, written by any pod author: parses or names the bad
// line; what parses has no empty node and no negative index.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "webhook/admission/scheduling_map.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto map = gvirtus::webhook::parseSchedulingMap(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!map) {
    if (map.error().message.empty()) {
      std::abort();
    }
    return 0;
  }
  for (const auto& [index, entry] : *map) {
    if (index < 0 || entry.node.empty()) {
      std::abort();
    }
  }
  return 0;
}
