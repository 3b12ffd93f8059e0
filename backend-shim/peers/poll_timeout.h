#pragma once

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <optional>

namespace gvirtus::backend_shim {

// poll(2)'s timeout from `now` until `next` (-1: none, wait for an event), rounded up:
// waking early would only spin.
inline int pollTimeout(std::chrono::steady_clock::time_point now,
                       std::optional<std::chrono::steady_clock::time_point> next) {
  if (!next) {
    return -1;
  }
  if (*next <= now) {
    return 0;
  }
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

}  // namespace gvirtus::backend_shim
