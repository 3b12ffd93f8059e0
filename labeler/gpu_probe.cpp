#include "labeler/gpu_probe.h"

#include <filesystem>

namespace gvirtus::labeler {

bool gpuPresent(const std::vector<std::string>& probePaths) {
  for (const auto& path : probePaths) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
      return true;
    }
  }
  return false;
}

}  // namespace gvirtus::labeler
