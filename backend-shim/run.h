#pragma once

namespace gvirtus::backend_shim {

// The whole program: parse flags, render the config, supervise the backend, serve health
// and metrics, publish the load, drain and stop on SIGTERM. Returns the exit code.
int run(int argc, const char* const* argv);

}  // namespace gvirtus::backend_shim
