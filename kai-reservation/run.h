#pragma once

namespace gvirtus::kai_reservation {

// The whole program: flags, the device from the environment, the annotation (retried with
// backoff), then a wait for SIGTERM. Returns the exit code.
int run(int argc, const char* const* argv);

}  // namespace gvirtus::kai_reservation
