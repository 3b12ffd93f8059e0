// The guard's stand-ins for CUDA's allocation calls (gpu_memory_cap.h). No CUDA header is
// needed: cudaError_t and CUresult are int-sized enums, streams are pointers, CUdeviceptr is
// an unsigned 64-bit number. Each stand-in finds the real function on its first call (the
// runtime is loaded by then: the caller links it) and keeps it.
#include "backend-shim/peer_guard/gpu_memory_cap.h"

#include <stddef.h>

#include "backend-shim/peer_guard/allocation_ledger.h"
#include "backend-shim/peer_guard/guard_report.h"
#include "backend-shim/peer_guard/loaded_symbol.h"

namespace gvirtus::peer_guard {
namespace {

constexpr int kSuccess = 0;
constexpr int kOutOfMemory = 2;     // cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY
constexpr int kNotInitialized = 3;  // cudaErrorInitializationError, CUDA_ERROR_NOT_INITIALIZED

bool refusalReported = false;

// A real CUDA function: found on the first call and kept.
struct Real {
  const char* name;
  void* function = nullptr;
  bool missingReported = false;
};

// The real function of `real`; null when no loaded object has it (said once per name).
template <typename Function>
Function resolve(Real& real) {
  void* found = __atomic_load_n(&real.function, __ATOMIC_ACQUIRE);
  if (found == nullptr) {
    found = loadedFunction(real.name);
    if (found == nullptr) {
      if (!__atomic_exchange_n(&real.missingReported, true, __ATOMIC_RELAXED)) {
        report("no loaded library defines this CUDA function; its calls fail", real.name);
      }
      return nullptr;
    }
    __atomic_store_n(&real.function, found, __ATOMIC_RELEASE);
  }
  return reinterpret_cast<Function>(found);
}

int refuse() {
  if (!__atomic_exchange_n(&refusalReported, true, __ATOMIC_RELAXED)) {
    report("an allocation past the pod's GPU memory share was refused (said once)", nullptr);
  }
  return kOutOfMemory;
}

// An allocation of `bytes`, made by `allocate` (which returns the CUDA result and sets the
// address and, for a pitched one, what it holds) only when the cap leaves room for it. One
// that turns out to hold more than the cap leaves (a pitched one's padding) is freed with
// `release` and refused.
template <typename Allocate, typename Release>
int counted(uint64_t bytes, Allocate allocate, Release release) {
  const Grant grant = reserve(bytes);
  if (grant == Grant::Refused) {
    return refuse();
  }
  uint64_t address = 0;
  uint64_t holds = bytes;
  const int result = allocate(address, holds);
  if (grant == Grant::Counted && !settle(bytes, result == kSuccess ? address : 0, holds)) {
    (void)release(address);
    return refuse();
  }
  return result;
}

// A free made by `release`; what `address` held is given back once it succeeded.
template <typename Release>
int uncounted(uint64_t address, Release release) {
  const uint64_t generation = generationOf(address);
  const int result = release();
  if (result == kSuccess) {
    forget(address, generation);
  }
  return result;
}

// The share as the total, what is left of it as free.
void clampInfo(size_t* free, size_t* total) {
  const uint64_t limit = cap();
  if (limit == 0 || free == nullptr || total == nullptr) {
    return;
  }
  const uint64_t holding = held();
  const uint64_t left = holding >= limit ? 0 : limit - holding;
  *total = *total > limit ? static_cast<size_t>(limit) : *total;
  *free = *free > left ? static_cast<size_t>(left) : *free;
}

uint64_t product(size_t a, size_t b) {
  uint64_t out = 0;
  return __builtin_mul_overflow(static_cast<uint64_t>(a), static_cast<uint64_t>(b), &out)
             ? ~uint64_t{0}
             : out;
}

uint64_t addressOf(const void* pointer) {
  return reinterpret_cast<uint64_t>(pointer);
}

}  // namespace

void setMemoryCap(uint64_t bytes) {
  setCap(bytes);
}

}  // namespace gvirtus::peer_guard

using gvirtus::peer_guard::addressOf;
using gvirtus::peer_guard::clampInfo;
using gvirtus::peer_guard::counted;
using gvirtus::peer_guard::kNotInitialized;
using gvirtus::peer_guard::kSuccess;
using gvirtus::peer_guard::product;
using gvirtus::peer_guard::Real;
using gvirtus::peer_guard::resolve;
using gvirtus::peer_guard::uncounted;
using DevicePointer = unsigned long long;  // CUdeviceptr

namespace {

// The real functions, each found once.
Real cudaMallocReal{"cudaMalloc"};
Real cudaMallocManagedReal{"cudaMallocManaged"};
Real cudaMallocPitchReal{"cudaMallocPitch"};
Real cudaMallocAsyncReal{"cudaMallocAsync"};
Real cudaFreeReal{"cudaFree"};
Real cudaFreeAsyncReal{"cudaFreeAsync"};
Real cudaMemGetInfoReal{"cudaMemGetInfo"};
Real cuMemAllocReal{"cuMemAlloc_v2"};
Real cuMemAllocManagedReal{"cuMemAllocManaged"};
Real cuMemAllocPitchReal{"cuMemAllocPitch_v2"};
Real cuMemAllocAsyncReal{"cuMemAllocAsync"};
Real cuMemFreeReal{"cuMemFree_v2"};
Real cuMemFreeAsyncReal{"cuMemFreeAsync"};
Real cuMemGetInfoReal{"cuMemGetInfo_v2"};

// A pitched allocation's rows as the driver pads them at most (its pitch alignment, 512 bytes
// on every GPU so far): reserved before the call, so that the padding rarely has to be
// given back after it.
constexpr size_t kPitchAlignment = 512;
size_t paddedWidth(size_t width) {
  return width > ~size_t{0} - (kPitchAlignment - 1)
             ? width
             : (width + kPitchAlignment - 1) & ~(kPitchAlignment - 1);
}

// The runtime's free and the driver's, for an allocation that has to be given back.
int releaseRuntime(uint64_t address) {
  auto free = resolve<int (*)(void*)>(cudaFreeReal);
  return free == nullptr ? kNotInitialized : free(reinterpret_cast<void*>(address));
}
int releaseDriver(uint64_t address) {
  auto free = resolve<int (*)(DevicePointer)>(cuMemFreeReal);
  return free == nullptr ? kNotInitialized : free(address);
}

// The runtime's or the driver's memory figures, the share as the total.
int clampedInfo(Real& real, size_t* free, size_t* total) {
  auto next = resolve<int (*)(size_t*, size_t*)>(real);
  if (next == nullptr) {
    return kNotInitialized;
  }
  const int result = next(free, total);
  if (result == kSuccess) {
    clampInfo(free, total);
  }
  return result;
}

uint64_t addressAt(void* const* pointer) {
  return pointer != nullptr ? addressOf(*pointer) : 0;
}
uint64_t addressAt(const DevicePointer* pointer) {
  return pointer != nullptr ? *pointer : 0;
}

// An allocation of `bytes` made by `call`, which writes its address to `*pointer`.
template <typename Pointer, typename Call>
int countedAt(Pointer* pointer, uint64_t bytes, Call call, int (*release)(uint64_t)) {
  return counted(
      bytes,
      [&](uint64_t& address, uint64_t&) {
        const int result = call();
        address = result == kSuccess ? addressAt(pointer) : 0;
        return result;
      },
      release);
}

// A pitched one: it holds its rows as the driver padded them, `*pitch` bytes each.
template <typename Pointer, typename Call>
int countedPitched(Pointer* pointer, size_t* pitch, size_t width, size_t height, Call call,
                   int (*release)(uint64_t)) {
  return counted(
      product(paddedWidth(width), height),
      [&](uint64_t& address, uint64_t& holds) {
        const int result = call();
        address = result == kSuccess ? addressAt(pointer) : 0;
        if (address != 0 && pitch != nullptr) {
          holds = product(*pitch, height);
        }
        return result;
      },
      release);
}

}  // namespace

#define GVIRTUS_STAND_IN(NAME, ...) \
  extern "C" [[gnu::visibility("default")]] int NAME(__VA_ARGS__) noexcept

GVIRTUS_STAND_IN(cudaMalloc, void** pointer, size_t bytes) {
  auto next = resolve<int (*)(void**, size_t)>(cudaMallocReal);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return countedAt(
      pointer, bytes, [&] { return next(pointer, bytes); }, releaseRuntime);
}

GVIRTUS_STAND_IN(cudaMallocManaged, void** pointer, size_t bytes, unsigned flags) {
  auto next = resolve<int (*)(void**, size_t, unsigned)>(cudaMallocManagedReal);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return countedAt(
      pointer, bytes, [&] { return next(pointer, bytes, flags); }, releaseRuntime);
}

GVIRTUS_STAND_IN(cudaMallocPitch, void** pointer, size_t* pitch, size_t width, size_t height) {
  auto next = resolve<int (*)(void**, size_t*, size_t, size_t)>(cudaMallocPitchReal);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return countedPitched(
      pointer, pitch, width, height, [&] { return next(pointer, pitch, width, height); },
      releaseRuntime);
}

GVIRTUS_STAND_IN(cudaMallocAsync, void** pointer, size_t bytes, void* stream) {
  auto next = resolve<int (*)(void**, size_t, void*)>(cudaMallocAsyncReal);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return countedAt(
      pointer, bytes, [&] { return next(pointer, bytes, stream); }, releaseRuntime);
}

GVIRTUS_STAND_IN(cudaFree, void* pointer) {
  auto next = resolve<int (*)(void*)>(cudaFreeReal);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return uncounted(addressOf(pointer), [&] { return next(pointer); });
}

GVIRTUS_STAND_IN(cudaFreeAsync, void* pointer, void* stream) {
  auto next = resolve<int (*)(void*, void*)>(cudaFreeAsyncReal);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return uncounted(addressOf(pointer), [&] { return next(pointer, stream); });
}

GVIRTUS_STAND_IN(cudaMemGetInfo, size_t* free, size_t* total) {
  return clampedInfo(cudaMemGetInfoReal, free, total);
}

GVIRTUS_STAND_IN(cuMemAlloc_v2, DevicePointer* pointer, size_t bytes) {
  auto next = resolve<int (*)(DevicePointer*, size_t)>(cuMemAllocReal);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return countedAt(
      pointer, bytes, [&] { return next(pointer, bytes); }, releaseDriver);
}

GVIRTUS_STAND_IN(cuMemAllocManaged, DevicePointer* pointer, size_t bytes, unsigned flags) {
  auto next = resolve<int (*)(DevicePointer*, size_t, unsigned)>(cuMemAllocManagedReal);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return countedAt(
      pointer, bytes, [&] { return next(pointer, bytes, flags); }, releaseDriver);
}

GVIRTUS_STAND_IN(cuMemAllocPitch_v2, DevicePointer* pointer, size_t* pitch, size_t width,
                 size_t height, unsigned elementBytes) {
  auto next =
      resolve<int (*)(DevicePointer*, size_t*, size_t, size_t, unsigned)>(cuMemAllocPitchReal);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return countedPitched(
      pointer, pitch, width, height,
      [&] { return next(pointer, pitch, width, height, elementBytes); }, releaseDriver);
}

GVIRTUS_STAND_IN(cuMemAllocAsync, DevicePointer* pointer, size_t bytes, void* stream) {
  auto next = resolve<int (*)(DevicePointer*, size_t, void*)>(cuMemAllocAsyncReal);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return countedAt(
      pointer, bytes, [&] { return next(pointer, bytes, stream); }, releaseDriver);
}

GVIRTUS_STAND_IN(cuMemFree_v2, DevicePointer pointer) {
  auto next = resolve<int (*)(DevicePointer)>(cuMemFreeReal);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return uncounted(pointer, [&] { return next(pointer); });
}

GVIRTUS_STAND_IN(cuMemFreeAsync, DevicePointer pointer, void* stream) {
  auto next = resolve<int (*)(DevicePointer, void*)>(cuMemFreeAsyncReal);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return uncounted(pointer, [&] { return next(pointer, stream); });
}

GVIRTUS_STAND_IN(cuMemGetInfo_v2, size_t* free, size_t* total) {
  return clampedInfo(cuMemGetInfoReal, free, total);
}
