#pragma once

#include "device-plugin/options.h"

namespace gvirtus::device_plugin {

// The whole program once its flags are parsed: CDI spec, health server, serving and
// registering until SIGTERM. Returns the exit code.
int run(const Options& options);

}  // namespace gvirtus::device_plugin
