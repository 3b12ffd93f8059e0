#pragma once

#include "backend-shim/options.h"

namespace gvirtus::backend_shim {

// The whole program once its flags are parsed: render the config, supervise the backend,
// serve health and metrics, publish the load, drain and stop on SIGTERM. Returns the exit
// code.
int run(const Options& options);

}  // namespace gvirtus::backend_shim
