#pragma once

namespace gvirtus::webhook {

// The whole program: flags, health server, backend source, TLS, the HTTPS admission
// server. Returns the exit code: 0 after SIGTERM/SIGINT, 1 on a fatal error, 2 on bad
// flags or configuration.
int run(int argc, const char* const* argv);

}  // namespace gvirtus::webhook
