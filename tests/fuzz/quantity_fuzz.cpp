// Kubernetes quantities from pod annotations (gvirtus.io/gpu-memory, KAI gpu-memory):
// parsed or refused, never a crash, never a negative or non-finite memory.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/contract/quantity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto value = gvirtus::parseQuantity(text); value && !std::isfinite(*value)) {
    std::abort();
  }
  if (auto mib = gvirtus::parseMemoryMiB(text); mib && *mib < 0) {
    std::abort();
  }
  return 0;
}
