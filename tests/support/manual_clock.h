#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <vector>

#include "common/time/clock.h"

namespace gvirtus::testing {

// A clock that moves only when the test advances it. A loop that sleeps on it blocks until
// the test has advanced past the end of its sleep (or stops it); the test sees every sleep
// asked for, in order, so it can check the waits instead of timing them.
class ManualClock final : public Clock {
 public:
  TimePoint now() const override {
    std::lock_guard lock(mutex_);
    return now_;
  }

  bool sleepUnlessStopped(const std::stop_token& stop, Duration duration) override {
    std::unique_lock lock(mutex_);
    const TimePoint until = now_ + duration;
    asked_.push_back(duration);
    changed_.notify_all();
    return changed_.wait(lock, stop, [&] { return now_ >= until; });
  }

  void advance(Duration duration) {
    std::lock_guard lock(mutex_);
    now_ += duration;
    changed_.notify_all();
  }

  // Blocks until `count` sleeps have been asked for in all, for at most `timeout` of real
  // time (a loop that never sleeps must not hang the test); true when they were.
  bool waitForSleeps(size_t count, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return asked_.size() >= count; });
  }

  // The sleeps asked for so far, in order.
  std::vector<Duration> sleeps() const {
    std::lock_guard lock(mutex_);
    return asked_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable_any changed_;
  TimePoint now_{std::chrono::hours(1)};
  std::vector<Duration> asked_;
};

}  // namespace gvirtus::testing
