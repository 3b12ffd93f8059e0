#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace gvirtus::bench {

// A request as a GVirtuS frontend frames it: u64 length and routine name, u64 length and an
// input of 100-500 bytes.
inline std::string gvirtusRequest(std::mt19937& random) {
  static const std::vector<std::string> routines = {"cudaMalloc", "cudaMemcpy", "cudaLaunchKernel",
                                                    "cublasSgemm_v2", "cudaFree"};
  const std::string& routine = routines[random() % routines.size()];
  const uint64_t inputSize = 100 + random() % 401;
  const uint64_t nameSize = routine.size();
  std::string out(sizeof(nameSize), '\0');
  std::memcpy(out.data(), &nameSize, sizeof(nameSize));
  out += routine;
  out.append(reinterpret_cast<const char*>(&inputSize), sizeof(inputSize));
  out.append(inputSize, 'x');
  return out;
}

}  // namespace gvirtus::bench
