#pragma once

#include "webhook/options.h"

namespace gvirtus::webhook {

// The whole program once its flags are parsed: health server, backend source, TLS, the
// HTTPS admission server. Returns the exit code: 0 after SIGTERM/SIGINT, 1 on a fatal
// error, 2 on a configuration found bad.
int run(const Options& options);

}  // namespace gvirtus::webhook
