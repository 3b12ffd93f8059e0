// A stand-in for the CUDA runtime and driver allocation calls, for the fake backend: one GPU
// of 16 GiB whose memory is only counted, with the C signatures of libcudart and libcuda
// (cudaError_t and CUresult as int, CUdeviceptr as unsigned long long). It counts the
// allocations that reach it, so that a test can tell one the guard refused from one the
// "driver" refused.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace {

constexpr uint64_t kTotal = 16ull << 30;
constexpr int kSuccess = 0;
constexpr int kOutOfMemory = 2;
constexpr int kInvalidValue = 1;

std::mutex mutex;
std::map<uint64_t, uint64_t> allocations;  // address -> bytes
uint64_t used = 0;
uint64_t nextAddress = 0x7f0000000000ull;
std::atomic<long> reached{0};

int allocate(uint64_t bytes, uint64_t& address) {
  ++reached;
  std::lock_guard lock(mutex);
  if (bytes > kTotal - used) {
    return kOutOfMemory;
  }
  address = nextAddress;
  nextAddress += (bytes + 0xfffff) & ~uint64_t{0xfffff};  // 1 MiB apart, as a driver aligns
  nextAddress += 1ull << 20;
  allocations[address] = bytes;
  used += bytes;
  return kSuccess;
}

int release(uint64_t address) {
  std::lock_guard lock(mutex);
  if (address == 0) {
    return kSuccess;  // cudaFree(0): a no-op that creates the context
  }
  auto it = allocations.find(address);
  if (it == allocations.end()) {
    return kInvalidValue;
  }
  used -= it->second;
  allocations.erase(it);
  return kSuccess;
}

int info(size_t* free, size_t* total) {
  std::lock_guard lock(mutex);
  *free = static_cast<size_t>(kTotal - used);
  *total = static_cast<size_t>(kTotal);
  return kSuccess;
}

}  // namespace

extern "C" {

int cudaMalloc(void** pointer, size_t bytes) {
  uint64_t address = 0;
  const int result = allocate(bytes, address);
  *pointer = reinterpret_cast<void*>(address);
  return result;
}

// Rows padded to 1 KiB: more than the guard assumes a driver pads them, so that its check of
// what the allocation turned out to hold is what keeps a pitched one within a share.
// (Not through cudaMalloc: a call between a library's own functions would go to the guard's
// stand-in, where the real runtime's never does.)
int cudaMallocPitch(void** pointer, size_t* pitch, size_t width, size_t height) {
  *pitch = (width + 1023) & ~size_t{1023};
  uint64_t address = 0;
  const int result = allocate(*pitch * height, address);
  *pointer = reinterpret_cast<void*>(address);
  return result;
}

int cudaFree(void* pointer) {
  return release(reinterpret_cast<uint64_t>(pointer));
}

int cudaMemGetInfo(size_t* free, size_t* total) {
  return info(free, total);
}

int cuMemAlloc_v2(unsigned long long* pointer, size_t bytes) {
  uint64_t address = 0;
  const int result = allocate(bytes, address);
  *pointer = address;
  return result;
}

int cuMemFree_v2(unsigned long long pointer) {
  return release(pointer);
}

int cuMemGetInfo_v2(size_t* free, size_t* total) {
  return info(free, total);
}

// Allocations that reached this library, whatever their answer.
long fakeCudaAllocationsReached() {
  return reached.load();
}

}  // extern "C"
