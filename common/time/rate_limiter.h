#pragma once

#include <chrono>
#include <functional>
#include <mutex>

namespace gvirtus {

// A token bucket: `qps` tokens per second refill a bucket of `burst` tokens; each request
// takes one. Thread-safe. The clock is a parameter so tests are deterministic.
class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // qps <= 0 disables limiting; burst < 1 counts as 1. The bucket starts full.
  RateLimiter(double qps, int burst, std::function<Clock::time_point()> now = {});

  // Takes a token, possibly one not yet refilled, and returns how long the caller must wait
  // before using it (zero when one was available). Waiters are served in call order.
  Clock::duration reserve();
  // Takes a token, sleeping until it is available.
  void acquire();
  // Takes a token only when one is available now.
  bool tryAcquire();

  bool unlimited() const { return qps_ <= 0; }

 private:
  void refillLocked(Clock::time_point now);

  double qps_;
  double burst_;
  std::function<Clock::time_point()> now_;
  std::mutex mutex_;
  double tokens_;
  Clock::time_point last_;
};

}  // namespace gvirtus
