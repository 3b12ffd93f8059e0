// A stand-in for libnvidia-ml.so.1 for the shim's tests: two GPUs with fixed numbers, the
// seven functions the shim looks up, with NVML's C signatures.
#include <cstring>

namespace {
struct FakeDevice {
  unsigned long long total;
  unsigned long long used;
  unsigned int utilization;
};
FakeDevice gDevices[2] = {{80ull << 30, 1ull << 30, 12}, {40ull << 30, 0, 0}};
int gInitialized = 0;
}  // namespace

extern "C" {

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};

int nvmlInit_v2() {
  ++gInitialized;
  return 0;
}
int nvmlShutdown() {
  --gInitialized;
  return 0;
}
const char* nvmlErrorString(int) {
  return "fake NVML error";
}
int nvmlDeviceGetCount_v2(unsigned int* count) {
  if (gInitialized <= 0) {
    return 1;  // NVML_ERROR_UNINITIALIZED
  }
  *count = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index >= 2) {
    return 2;  // NVML_ERROR_INVALID_ARGUMENT
  }
  *device = &gDevices[index];
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* device, nvmlMemory_t* memory) {
  const auto* d = static_cast<FakeDevice*>(device);
  memory->total = d->total;
  memory->used = d->used;
  memory->free = d->total - d->used;
  return 0;
}
int nvmlDeviceGetUtilizationRates(void* device, nvmlUtilization_t* utilization) {
  const auto* d = static_cast<FakeDevice*>(device);
  utilization->gpu = d->utilization;
  utilization->memory = 0;
  return 0;
}
}
