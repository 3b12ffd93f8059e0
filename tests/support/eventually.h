#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace gvirtus::testing {

// Polls `condition` every `interval` (50 ms unless a helper that many tests wait on asks
// for less) until it holds or `timeout` passes: the one way a test waits for a fact another
// thread or process brings about. True when it held.
inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = std::chrono::seconds(20),
                       std::chrono::milliseconds interval = std::chrono::milliseconds(50)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) {
      return true;
    }
    std::this_thread::sleep_for(interval);
  }
  return condition();
}

}  // namespace gvirtus::testing
