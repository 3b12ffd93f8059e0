#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace gvirtus::bench {

// The p-quantile (0..1) of `values`, nearest rank; 0 when empty.
inline double percentile(std::vector<double> values, double p) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p * values.size()))];
}

inline double microseconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

}  // namespace gvirtus::bench
