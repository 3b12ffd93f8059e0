#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/base/error.h"

// The node's GPUs as NVML reports them. NVML is loaded at run time with dlopen when
// libnvidia-ml.so.1 is there (the NVIDIA container toolkit mounts it); the build does not
// depend on it, and a node or test machine without it simply has no GPUs.
namespace gvirtus::backend_shim {

struct GpuInfo {
  unsigned index = 0;
  uint64_t memoryTotalBytes = 0;
  uint64_t memoryUsedBytes = 0;
  unsigned utilizationPercent = 0;  // GPU busy time over NVML's last sample period
  // Empty when NVML does not say (an older driver).
  std::string uuid;
  std::string model;

  bool operator==(const GpuInfo&) const = default;
};

class NvmlGpus {
 public:
  // Loads `library` and initializes NVML. When the library is missing or NVML does not
  // initialize, the result is unavailable (read() returns no GPUs) and one info line says
  // why; that is the normal case on a machine without the NVIDIA driver.
  static std::unique_ptr<NvmlGpus> open(const std::string& library = "libnvidia-ml.so.1");
  ~NvmlGpus();
  NvmlGpus(const NvmlGpus&) = delete;
  NvmlGpus& operator=(const NvmlGpus&) = delete;

  // Use open(); constructed with no API, the object is unavailable (no NVML).
  struct Api;
  explicit NvmlGpus(std::unique_ptr<Api> api);

  bool available() const;
  // Every GPU's memory, utilization, UUID and model name; no GPUs when unavailable. A GPU that
  // fails to answer is an error (the caller keeps its previous numbers).
  Result<std::vector<GpuInfo>> read() const;

 private:
  std::unique_ptr<Api> api_;
};

}  // namespace gvirtus::backend_shim
