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
bool missingReported = false;

// The real `name`, found once; null when no loaded object has it (said once).
template <typename Function>
Function real(const char* name, void*& kept) {
  void* found = __atomic_load_n(&kept, __ATOMIC_ACQUIRE);
  if (found == nullptr) {
    found = loadedFunction(name);
    if (found == nullptr) {
      if (!__atomic_exchange_n(&missingReported, true, __ATOMIC_RELAXED)) {
        report("no loaded library defines this CUDA function; its calls fail (said once)", name);
      }
      return nullptr;
    }
    __atomic_store_n(&kept, found, __ATOMIC_RELEASE);
  }
  return reinterpret_cast<Function>(found);
}

// An allocation of `bytes`, made by `allocate` (which returns the CUDA result and sets the
// address and, for a pitched one, what it holds) only when the cap leaves room for it.
template <typename Allocate>
int counted(uint64_t bytes, Allocate allocate) {
  const Grant grant = reserve(bytes);
  if (grant == Grant::Refused) {
    if (!__atomic_exchange_n(&refusalReported, true, __ATOMIC_RELAXED)) {
      report("an allocation past the pod's GPU memory share was refused (said once)", nullptr);
    }
    return kOutOfMemory;
  }
  uint64_t address = 0;
  uint64_t holds = bytes;
  const int result = allocate(address, holds);
  if (grant == Grant::Counted) {
    settle(bytes, result == kSuccess ? address : 0, holds);
  }
  return result;
}

// A free made by `release`; what `address` held is given back once it succeeded.
template <typename Release>
int uncounted(uint64_t address, Release release) {
  const int result = release();
  if (result == kSuccess) {
    forget(address);
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
using gvirtus::peer_guard::real;
using gvirtus::peer_guard::uncounted;
using DevicePointer = unsigned long long;  // CUdeviceptr

// Defines the stand-in NAME with the given parameters, beside `kept_NAME`, where its real
// function is kept once found.
#define GVIRTUS_STAND_IN(NAME, ...) \
  namespace {                       \
  void* kept_##NAME = nullptr;      \
  }                                 \
  extern "C" [[gnu::visibility("default")]] int NAME(__VA_ARGS__) noexcept

GVIRTUS_STAND_IN(cudaMalloc, void** pointer, size_t bytes) {
  auto next = real<int (*)(void**, size_t)>("cudaMalloc", kept_cudaMalloc);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return counted(bytes, [&](uint64_t& address, uint64_t&) {
    const int result = next(pointer, bytes);
    address = result == kSuccess && pointer != nullptr ? addressOf(*pointer) : 0;
    return result;
  });
}

GVIRTUS_STAND_IN(cudaMallocManaged, void** pointer, size_t bytes, unsigned flags) {
  auto next = real<int (*)(void**, size_t, unsigned)>("cudaMallocManaged", kept_cudaMallocManaged);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return counted(bytes, [&](uint64_t& address, uint64_t&) {
    const int result = next(pointer, bytes, flags);
    address = result == kSuccess && pointer != nullptr ? addressOf(*pointer) : 0;
    return result;
  });
}

GVIRTUS_STAND_IN(cudaMallocPitch, void** pointer, size_t* pitch, size_t width, size_t height) {
  auto next =
      real<int (*)(void**, size_t*, size_t, size_t)>("cudaMallocPitch", kept_cudaMallocPitch);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return counted(product(width, height), [&](uint64_t& address, uint64_t& holds) {
    const int result = next(pointer, pitch, width, height);
    address = result == kSuccess && pointer != nullptr ? addressOf(*pointer) : 0;
    if (address != 0 && pitch != nullptr) {
      holds = product(*pitch, height);  // the rows' padding counts once it is made
    }
    return result;
  });
}

GVIRTUS_STAND_IN(cudaMallocAsync, void** pointer, size_t bytes, void* stream) {
  auto next = real<int (*)(void**, size_t, void*)>("cudaMallocAsync", kept_cudaMallocAsync);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return counted(bytes, [&](uint64_t& address, uint64_t&) {
    const int result = next(pointer, bytes, stream);
    address = result == kSuccess && pointer != nullptr ? addressOf(*pointer) : 0;
    return result;
  });
}

GVIRTUS_STAND_IN(cudaFree, void* pointer) {
  auto next = real<int (*)(void*)>("cudaFree", kept_cudaFree);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return uncounted(addressOf(pointer), [&] { return next(pointer); });
}

GVIRTUS_STAND_IN(cudaFreeAsync, void* pointer, void* stream) {
  auto next = real<int (*)(void*, void*)>("cudaFreeAsync", kept_cudaFreeAsync);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return uncounted(addressOf(pointer), [&] { return next(pointer, stream); });
}

GVIRTUS_STAND_IN(cudaMemGetInfo, size_t* free, size_t* total) {
  auto next = real<int (*)(size_t*, size_t*)>("cudaMemGetInfo", kept_cudaMemGetInfo);
  if (next == nullptr) {
    return kNotInitialized;
  }
  const int result = next(free, total);
  if (result == kSuccess) {
    clampInfo(free, total);
  }
  return result;
}

GVIRTUS_STAND_IN(cuMemAlloc_v2, DevicePointer* pointer, size_t bytes) {
  auto next = real<int (*)(DevicePointer*, size_t)>("cuMemAlloc_v2", kept_cuMemAlloc_v2);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return counted(bytes, [&](uint64_t& address, uint64_t&) {
    const int result = next(pointer, bytes);
    address = result == kSuccess && pointer != nullptr ? *pointer : 0;
    return result;
  });
}

GVIRTUS_STAND_IN(cuMemAllocManaged, DevicePointer* pointer, size_t bytes, unsigned flags) {
  auto next =
      real<int (*)(DevicePointer*, size_t, unsigned)>("cuMemAllocManaged", kept_cuMemAllocManaged);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return counted(bytes, [&](uint64_t& address, uint64_t&) {
    const int result = next(pointer, bytes, flags);
    address = result == kSuccess && pointer != nullptr ? *pointer : 0;
    return result;
  });
}

GVIRTUS_STAND_IN(cuMemAllocPitch_v2, DevicePointer* pointer, size_t* pitch, size_t width,
                 size_t height, unsigned elementBytes) {
  auto next = real<int (*)(DevicePointer*, size_t*, size_t, size_t, unsigned)>(
      "cuMemAllocPitch_v2", kept_cuMemAllocPitch_v2);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return counted(product(width, height), [&](uint64_t& address, uint64_t& holds) {
    const int result = next(pointer, pitch, width, height, elementBytes);
    address = result == kSuccess && pointer != nullptr ? *pointer : 0;
    if (address != 0 && pitch != nullptr) {
      holds = product(*pitch, height);
    }
    return result;
  });
}

GVIRTUS_STAND_IN(cuMemAllocAsync, DevicePointer* pointer, size_t bytes, void* stream) {
  auto next = real<int (*)(DevicePointer*, size_t, void*)>("cuMemAllocAsync", kept_cuMemAllocAsync);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return counted(bytes, [&](uint64_t& address, uint64_t&) {
    const int result = next(pointer, bytes, stream);
    address = result == kSuccess && pointer != nullptr ? *pointer : 0;
    return result;
  });
}

GVIRTUS_STAND_IN(cuMemFree_v2, DevicePointer pointer) {
  auto next = real<int (*)(DevicePointer)>("cuMemFree_v2", kept_cuMemFree_v2);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return uncounted(pointer, [&] { return next(pointer); });
}

GVIRTUS_STAND_IN(cuMemFreeAsync, DevicePointer pointer, void* stream) {
  auto next = real<int (*)(DevicePointer, void*)>("cuMemFreeAsync", kept_cuMemFreeAsync);
  if (next == nullptr) {
    return kNotInitialized;
  }
  return uncounted(pointer, [&] { return next(pointer, stream); });
}

GVIRTUS_STAND_IN(cuMemGetInfo_v2, size_t* free, size_t* total) {
  auto next = real<int (*)(size_t*, size_t*)>("cuMemGetInfo_v2", kept_cuMemGetInfo_v2);
  if (next == nullptr) {
    return kNotInitialized;
  }
  const int result = next(free, total);
  if (result == kSuccess) {
    clampInfo(free, total);
  }
  return result;
}
