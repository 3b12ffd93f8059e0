#pragma once

#include <chrono>
#include <stop_token>

#include "common/time/duration.h"

namespace gvirtus {

// The time a control loop reads and waits on. Production code runs on systemClock(); a test
// passes a manual clock and advances it, instead of sleeping until a fixed interval has
// passed (tests/support/manual_clock.h).
class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
  // Waits `duration` of this clock's time, waking at once when `stop` is requested. True
  // when the whole duration passed, false when stopped.
  virtual bool sleepUnlessStopped(const std::stop_token& stop, Duration duration) = 0;
};

// std::chrono::steady_clock, and sleeps in real time.
Clock& systemClock();

}  // namespace gvirtus
