#include "common/time/rate_limiter.h"

#include <algorithm>
#include <thread>

namespace gvirtus {

RateLimiter::RateLimiter(double qps, int burst, std::function<Clock::time_point()> now)
    : qps_(qps),
      burst_(static_cast<double>(std::max(burst, 1))),
      now_(now ? std::move(now) : [] { return Clock::now(); }),
      tokens_(burst_),
      last_(now_()) {}

void RateLimiter::refillLocked(Clock::time_point now) {
  if (now <= last_) {
    return;
  }
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
  last_ = now;
}

RateLimiter::Clock::duration RateLimiter::reserve() {
  if (unlimited()) {
    return Clock::duration::zero();
  }
  std::lock_guard lock(mutex_);
  refillLocked(now_());
  tokens_ -= 1;
  if (tokens_ >= 0) {
    return Clock::duration::zero();
  }
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(-tokens_ / qps_));
}

void RateLimiter::acquire() {
  auto wait = reserve();
  if (wait > Clock::duration::zero()) {
    std::this_thread::sleep_for(wait);
  }
}

bool RateLimiter::tryAcquire() {
  if (unlimited()) {
    return true;
  }
  std::lock_guard lock(mutex_);
  refillLocked(now_());
  if (tokens_ < 1) {
    return false;
  }
  tokens_ -= 1;
  return true;
}

}  // namespace gvirtus
