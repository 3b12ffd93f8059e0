// A stand-in for a GVirtuS plugin (libcudart's: plugins/cudart), for the fake backend, which
// loads it with dlopen's local scope as GVirtuS loads its plugins. It links the fake CUDA
// library (fake_cuda.cpp) as the real plugin links libcudart, and makes the calls a session's
// requests would: "malloc BYTES" and "cumalloc BYTES" answer "RESULT ADDRESS", "pitch WIDTH
// HEIGHT" "RESULT ADDRESS PITCH", "free ADDRESS" and "cufree ADDRESS" "RESULT", "meminfo"
// "RESULT FREE TOTAL", and "reached" the allocations that reached the library.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <string>

extern "C" {
// The fake CUDA library's calls, as the CUDA headers declare them.
int cudaMalloc(void** pointer, size_t bytes);
int cudaMallocPitch(void** pointer, size_t* pitch, size_t width, size_t height);
int cudaFree(void* pointer);
int cudaMemGetInfo(size_t* free, size_t* total);
int cuMemAlloc_v2(unsigned long long* pointer, size_t bytes);
int cuMemFree_v2(unsigned long long pointer);
long fakeCudaAllocationsReached();
}

namespace {

std::string answer(const std::string& request) {
  std::istringstream in(request);
  std::string verb;
  in >> verb;
  unsigned long long number = 0;
  unsigned long long second = 0;
  in >> std::setbase(0) >> number >> second;
  if (verb == "malloc") {
    void* pointer = nullptr;
    const int result = cudaMalloc(&pointer, number);
    return std::to_string(result) + " " + std::to_string(reinterpret_cast<uintptr_t>(pointer));
  }
  if (verb == "pitch") {
    void* pointer = nullptr;
    size_t pitch = 0;
    const int result = cudaMallocPitch(&pointer, &pitch, number, second);
    return std::to_string(result) + " " + std::to_string(reinterpret_cast<uintptr_t>(pointer)) +
           " " + std::to_string(pitch);
  }
  if (verb == "cumalloc") {
    unsigned long long pointer = 0;
    const int result = cuMemAlloc_v2(&pointer, number);
    return std::to_string(result) + " " + std::to_string(pointer);
  }
  if (verb == "free") {
    return std::to_string(cudaFree(reinterpret_cast<void*>(number)));
  }
  if (verb == "cufree") {
    return std::to_string(cuMemFree_v2(number));
  }
  if (verb == "meminfo") {
    size_t free = 0;
    size_t total = 0;
    const int result = cudaMemGetInfo(&free, &total);
    return std::to_string(result) + " " + std::to_string(free) + " " + std::to_string(total);
  }
  if (verb == "reached") {
    return std::to_string(fakeCudaAllocationsReached());
  }
  return "unknown";
}

}  // namespace

extern "C" [[gnu::visibility("default")]] int fakeCudaCommand(const char* request, char* reply,
                                                              size_t size) {
  const std::string text = answer(request);
  std::snprintf(reply, size, "%s", text.c_str());
  return 0;
}
