#include "common/time/clock.h"

#include "common/time/stoppable_sleep.h"

namespace gvirtus {
namespace {

class SystemClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
  bool sleepUnlessStopped(const std::stop_token& stop, Duration duration) override {
    return gvirtus::sleepUnlessStopped(stop, duration);
  }
};

}  // namespace

Clock& systemClock() {
  static SystemClock clock;
  return clock;
}

}  // namespace gvirtus
