#include "backend-shim/peer_guard/guard_settings.h"

#include <stddef.h>
#include <stdlib.h>

#include "backend-shim/peer_guard/guard_report.h"

namespace gvirtus::peer_guard {
namespace {

Settings loaded;
// Written once by the constructor; read with acquire so that a reader that sees it true
// sees `loaded` whole.
bool loadedReady = false;

Settings fromEnvironment() {
  return parseSettings(getenv(kPortEnv), getenv(kSocketEnv), getenv(kTimeoutEnv));
}

[[gnu::constructor]] void loadSettings() {
  loaded = fromEnvironment();
  __atomic_store_n(&loadedReady, true, __ATOMIC_RELEASE);
}

}  // namespace

long parseVariableNumber(const char* text, long max) {
  if (text == nullptr || *text == '\0') {
    return -1;
  }
  long value = 0;
  for (const char* c = text; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9') {
      return -1;
    }
    value = value * 10 + (*c - '0');
    if (value > max) {
      return -1;
    }
  }
  return value >= 1 ? value : -1;
}

Settings parseSettings(const char* port, const char* socketPath, const char* timeoutMs) {
  Settings settings;
  if (port == nullptr) {
    return settings;
  }
  settings.enabled = true;
  const long number = parseVariableNumber(port, 65535);
  if (number < 0) {
    settings.everyPort = true;
    report("GVIRTUS_PEER_GUARD_PORT is not a port; every TCP listener is checked", port);
  } else {
    settings.port = static_cast<uint16_t>(number);
  }
  size_t length = 0;
  while (socketPath != nullptr && socketPath[length] != '\0') {
    ++length;
  }
  if (length == 0 || length >= sizeof(settings.gate.sun_path)) {
    report("GVIRTUS_PEER_GUARD_SOCKET is unset, empty or too long; every connection is refused",
           socketPath);
  } else {
    settings.gate.sun_family = AF_UNIX;
    for (size_t i = 0; i < length; ++i) {
      settings.gate.sun_path[i] = socketPath[i];
    }
    settings.gateLength = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length + 1);
    settings.gateKnown = true;
  }
  if (timeoutMs != nullptr) {
    const long timeout = parseVariableNumber(timeoutMs, 600000);
    if (timeout < 0) {
      report("GVIRTUS_PEER_GUARD_TIMEOUT_MS is not a number of milliseconds; using 5000",
             timeoutMs);
    } else {
      settings.timeoutMs = static_cast<int>(timeout);
    }
  }
  return settings;
}

const Settings& loadedSettings(Settings& scratch) {
  if (__atomic_load_n(&loadedReady, __ATOMIC_ACQUIRE)) {
    return loaded;
  }
  scratch = fromEnvironment();
  return scratch;
}

}  // namespace gvirtus::peer_guard
