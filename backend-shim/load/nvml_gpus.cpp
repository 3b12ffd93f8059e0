#include "backend-shim/load/nvml_gpus.h"

#include <dlfcn.h>

#include <cstring>

#include "common/telemetry/log.h"

namespace gvirtus::backend_shim {
namespace {

// The few NVML types this file uses, declared from NVML's documented ABI (nvml.h) so that
// the build needs no NVIDIA headers.
using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlNotSupported = 3;
struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;  // nvmlDevice_t
struct NvmlMemory {                    // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlUtilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};

using InitFn = NvmlReturn (*)();
using ShutdownFn = NvmlReturn (*)();
using CountFn = NvmlReturn (*)(unsigned int*);
using HandleFn = NvmlReturn (*)(unsigned int, NvmlDevice*);
using MemoryFn = NvmlReturn (*)(NvmlDevice, NvmlMemory*);
using UtilizationFn = NvmlReturn (*)(NvmlDevice, NvmlUtilization*);
using ErrorStringFn = const char* (*)(NvmlReturn);
using TextFn = NvmlReturn (*)(NvmlDevice, char*, unsigned int);
// NVML_DEVICE_NAME_V2_BUFFER_SIZE and NVML_DEVICE_UUID_V2_BUFFER_SIZE.
constexpr unsigned int kTextBuffer = 96;

template <typename Fn>
bool lookUp(void* library, const char* name, Fn& fn) {
  void* symbol = ::dlsym(library, name);
  if (symbol == nullptr) {
    return false;
  }
  static_assert(sizeof(fn) == sizeof(symbol));
  std::memcpy(&fn, &symbol, sizeof(fn));
  return true;
}

}  // namespace

struct NvmlGpus::Api {
  void* library = nullptr;
  bool initialized = false;
  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  CountFn count = nullptr;
  HandleFn handle = nullptr;
  MemoryFn memory = nullptr;
  UtilizationFn utilization = nullptr;
  ErrorStringFn errorString = nullptr;
  TextFn name = nullptr;  // optional, as uuid: what lacks them reports none
  TextFn uuid = nullptr;

  // The text `fn` writes for `device`; empty when it is missing or fails.
  static std::string text(TextFn fn, NvmlDevice device) {
    char buffer[kTextBuffer] = {};
    if (fn == nullptr || fn(device, buffer, kTextBuffer) != kNvmlSuccess) {
      return "";
    }
    // Printable ASCII only, as NVML's names and UUIDs are: the text goes into JSON, which
    // refuses what is not UTF-8.
    std::string out(buffer, ::strnlen(buffer, kTextBuffer));
    for (char& c : out) {
      if (c < 0x20 || c > 0x7e) {
        c = '?';
      }
    }
    return out;
  }

  std::string describe(NvmlReturn rc) const {
    const char* text = errorString != nullptr ? errorString(rc) : nullptr;
    return text != nullptr ? std::string(text) : "NVML error " + std::to_string(rc);
  }

  ~Api() {
    if (initialized && shutdown != nullptr) {
      shutdown();
    }
    if (library != nullptr) {
      ::dlclose(library);
    }
  }
};

NvmlGpus::NvmlGpus(std::unique_ptr<Api> api) : api_(std::move(api)) {}
NvmlGpus::~NvmlGpus() = default;

std::unique_ptr<NvmlGpus> NvmlGpus::open(const std::string& library) {
  auto api = std::make_unique<Api>();
  api->library = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api->library == nullptr) {
    const char* why = ::dlerror();
    log::info("NVML is not available; reporting no GPUs",
              {{"library", library}, {"reason", why != nullptr ? why : "dlopen failed"}});
    return std::make_unique<NvmlGpus>(nullptr);
  }
  lookUp(api->library, "nvmlErrorString", api->errorString);
  lookUp(api->library, "nvmlDeviceGetName", api->name);
  lookUp(api->library, "nvmlDeviceGetUUID", api->uuid);
  const bool complete = lookUp(api->library, "nvmlInit_v2", api->init) &&
                        lookUp(api->library, "nvmlShutdown", api->shutdown) &&
                        lookUp(api->library, "nvmlDeviceGetCount_v2", api->count) &&
                        lookUp(api->library, "nvmlDeviceGetHandleByIndex_v2", api->handle) &&
                        lookUp(api->library, "nvmlDeviceGetMemoryInfo", api->memory) &&
                        lookUp(api->library, "nvmlDeviceGetUtilizationRates", api->utilization);
  if (!complete) {
    log::info("NVML lacks a function this program uses; reporting no GPUs", {{"library", library}});
    return std::make_unique<NvmlGpus>(nullptr);
  }
  if (const NvmlReturn rc = api->init(); rc != kNvmlSuccess) {
    log::info("NVML did not initialize; reporting no GPUs",
              {{"library", library}, {"reason", api->describe(rc)}});
    return std::make_unique<NvmlGpus>(nullptr);
  }
  api->initialized = true;
  unsigned int count = 0;
  api->count(&count);
  log::info("NVML loaded", {{"library", library}, {"gpus", count}});
  return std::make_unique<NvmlGpus>(std::move(api));
}

bool NvmlGpus::available() const {
  return api_ != nullptr;
}

Result<std::vector<GpuInfo>> NvmlGpus::read() const {
  std::vector<GpuInfo> gpus;
  if (!api_) {
    return gpus;
  }
  unsigned int count = 0;
  if (const NvmlReturn rc = api_->count(&count); rc != kNvmlSuccess) {
    return fail("nvmlDeviceGetCount: " + api_->describe(rc));
  }
  for (unsigned int i = 0; i < count; ++i) {
    NvmlDevice device = nullptr;
    if (const NvmlReturn rc = api_->handle(i, &device); rc != kNvmlSuccess) {
      return fail("nvmlDeviceGetHandleByIndex(" + std::to_string(i) + "): " + api_->describe(rc));
    }
    NvmlMemory memory{};
    if (const NvmlReturn rc = api_->memory(device, &memory); rc != kNvmlSuccess) {
      return fail("nvmlDeviceGetMemoryInfo(" + std::to_string(i) + "): " + api_->describe(rc));
    }
    NvmlUtilization utilization{};
    // Some devices (MIG-enabled ones) do not report utilization: that reads as 0.
    if (const NvmlReturn rc = api_->utilization(device, &utilization);
        rc != kNvmlSuccess && rc != kNvmlNotSupported) {
      return fail("nvmlDeviceGetUtilizationRates(" + std::to_string(i) +
                  "): " + api_->describe(rc));
    }
    gpus.push_back(GpuInfo{.index = i,
                           .memoryTotalBytes = memory.total,
                           .memoryUsedBytes = memory.used,
                           .utilizationPercent = utilization.gpu,
                           .uuid = Api::text(api_->uuid, device),
                           .model = Api::text(api_->name, device)});
  }
  return gpus;
}

}  // namespace gvirtus::backend_shim
