#pragma once

#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "backend-shim/peer_guard/peer_guard_protocol.h"

namespace gvirtus::peer_guard {

// What the environment told the guard (peer_guard_protocol.h names the variables).
struct Settings {
  bool enabled = false;    // kPortEnv is set: accepted connections are checked
  bool everyPort = false;  // kPortEnv is set but is not a port: every TCP listener is checked
  uint16_t port = 0;
  bool gateKnown = false;  // kSocketEnv names a unix socket path that fits a sockaddr_un
  sockaddr_un gate{};
  socklen_t gateLength = 0;
  int timeoutMs = kDefaultTimeoutMs;
};

// A variable's value as a decimal number within [1, max], or -1 (unset, empty, not digits,
// out of range).
long parseVariableNumber(const char* text, long max);

// Settings from the three variables' values (null: unset). A mistake in them never opens
// the backend: a port that is not one checks every port, a missing or too long socket path
// refuses every connection, each said once on stderr.
Settings parseSettings(const char* port, const char* socketPath, const char* timeoutMs);

// The settings the library was loaded with: read from the environment by the library's
// constructor, before the program's main and its threads, and never written again, so every
// accept reads them without a lock. A program that accepts before that (another library's
// constructor) gets them read there, into its own copy.
const Settings& loadedSettings(Settings& scratch);

}  // namespace gvirtus::peer_guard
