/* libnvidia-ml.so.1 of the GVirtuS stand-in image (Dockerfile.gvirtus-standin): one GPU
 * of 16 GiB, nothing used, so that the backend shim publishes a GPU and pods asking for GPU
 * memory or a KAI gpu-fraction can be placed and counted on machines without one. It
 * answers the seven NVML calls the shim makes, with NVML's C signatures; no CUDA runs.
 * GVIRTUS_STANDIN_GPU_GIB (1 to 1024) makes the GPU bigger or smaller: the e2e scenarios
 * roll a bigger backend out that way. */
#include <stdlib.h>

typedef struct {
  unsigned long long total, free, used;
} nvml_memory;
typedef struct {
  unsigned int gpu, memory;
} nvml_utilization;

enum { kSuccess = 0, kUninitialized = 1, kInvalidArgument = 2 };
static unsigned long long total_bytes = 16ull << 30;
static int initialized;
static int device;

int nvmlInit_v2(void) {
  const char* gib = getenv("GVIRTUS_STANDIN_GPU_GIB");
  if (gib != NULL) {
    char* end = NULL;
    const long value = strtol(gib, &end, 10);
    if (end != gib && *end == '\0' && value >= 1 && value <= 1024) {
      total_bytes = (unsigned long long)value << 30;
    }
  }
  ++initialized;
  return kSuccess;
}
int nvmlShutdown(void) {
  if (initialized > 0) --initialized;
  return kSuccess;
}
const char* nvmlErrorString(int result) {
  return result == kUninitialized ? "stand-in NVML: not initialized" : "stand-in NVML: error";
}
int nvmlDeviceGetCount_v2(unsigned int* count) {
  if (initialized <= 0) return kUninitialized;
  *count = 1;
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** handle) {
  if (index != 0) return kInvalidArgument;
  *handle = &device;
  return kSuccess;
}
int nvmlDeviceGetMemoryInfo(void* handle, nvml_memory* memory) {
  if (handle != &device) return kInvalidArgument;
  memory->total = total_bytes;
  memory->used = 0;
  memory->free = total_bytes;
  return kSuccess;
}
int nvmlDeviceGetUtilizationRates(void* handle, nvml_utilization* utilization) {
  if (handle != &device) return kInvalidArgument;
  utilization->gpu = 0;
  utilization->memory = 0;
  return kSuccess;
}
