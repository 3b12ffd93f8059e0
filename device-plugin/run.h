#pragma once

namespace gvirtus::device_plugin {

// The whole program: flags, CDI spec, health server, serving and registering until
// SIGTERM. Returns the exit code.
int run(int argc, const char* const* argv);

}  // namespace gvirtus::device_plugin
