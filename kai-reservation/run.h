#pragma once

#include "kai-reservation/options.h"

namespace gvirtus::kai_reservation {

// The whole program once its flags are parsed: the device from the environment, the
// annotation (retried with backoff), then a wait for SIGTERM. Returns the exit code.
int run(const Options& options);

}  // namespace gvirtus::kai_reservation
