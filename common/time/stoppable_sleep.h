#pragma once

#include <stop_token>

#include "common/time/duration.h"

namespace gvirtus {

// Sleeps for `duration`, waking at once when `stop` is requested, so that every loop that
// waits between attempts shuts down promptly. True when the whole duration passed, false
// when stopped.
bool sleepUnlessStopped(const std::stop_token& stop, Duration duration);

}  // namespace gvirtus
