#include "common/time/stoppable_sleep.h"

#include <condition_variable>
#include <mutex>

namespace gvirtus {

bool sleepUnlessStopped(const std::stop_token& stop, Duration duration) {
  // Nothing notifies this condition: it wakes on the timeout or on the stop request.
  std::mutex mutex;
  std::condition_variable_any wake;
  std::unique_lock lock(mutex);
  wake.wait_for(lock, stop, duration, [] { return false; });
  return !stop.stop_requested();
}

}  // namespace gvirtus
