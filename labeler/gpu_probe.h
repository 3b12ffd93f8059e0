#pragma once

#include <string>
#include <vector>

namespace gvirtus::labeler {

// A GPU is present when any of the paths exists (NVIDIA's /proc/driver/nvidia/gpus is
// visible inside an unprivileged container, so no hostPath is needed).
bool gpuPresent(const std::vector<std::string>& probePaths);

}  // namespace gvirtus::labeler
