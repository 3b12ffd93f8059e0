// A stand-in for libnvidia-ml.so.1 for the shim's tests: two GPUs with fixed numbers, the
// nine functions the shim looks up, with NVML's C signatures.
#include <cstring>

namespace {
struct FakeDevice {
  unsigned long long total;
  unsigned long long used;
  unsigned int utilization;
  const char* name;
  const char* uuid;
};
FakeDevice gDevices[2] = {
    {80ull << 30, 1ull << 30, 12, "Fake GPU 80GB", "GPU-00000000-0000-0000-0000-000000000000"},
    {40ull << 30, 0, 0, "Fake GPU 40GB", "GPU-11111111-1111-1111-1111-111111111111"}};

// NVML's copy into a caller's buffer: NVML_ERROR_INSUFFICIENT_SIZE (7) when it does not fit.
int copyOut(const char* text, char* out, unsigned int length) {
  if (std::strlen(text) + 1 > length) {
    return 7;
  }
  std::strcpy(out, text);
  return 0;
}
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
int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  return copyOut(static_cast<FakeDevice*>(device)->name, name, length);
}
int nvmlDeviceGetUUID(void* device, char* uuid, unsigned int length) {
  return copyOut(static_cast<FakeDevice*>(device)->uuid, uuid, length);
}
}
