#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <vector>

#include "common/duration.h"
#include "common/error.h"
#include "common/flags.h"

namespace gvirtus::backend_shim {

inline constexpr const char* kProgram = "gvirtus-backend-shim";

struct Options {
  CommonOptions common;
  uint16_t port = 9999;
  std::vector<std::string> plugins;
  std::string configOut = "/tmp/gvirtus/properties.json";
  int maxSessions = 16;
  int maxLeakedSockets = 256;  // 0: never restart for leaked sockets
  Duration publishInterval = std::chrono::seconds(5);
  Duration drainTimeout = std::chrono::seconds(30);
  Duration stopTimeout = std::chrono::seconds(5);
  Duration startupTimeout = std::chrono::minutes(1);
  std::string gvirtusHome;   // default $GVIRTUS_HOME
  std::string podName;       // default $POD_NAME; empty: the load is not published
  std::string podNamespace;  // default $POD_NAMESPACE
  std::string nvmlLibrary = "libnvidia-ml.so.1";
  // The backend command without the config path; [0] resolved to an executable path.
  std::vector<std::string> backendCommand;
};

// Turns argv and the environment into Options. Returns the exit code to stop with instead
// when the program should not run: 0 after --help or --version, 2 after a bad flag or a bad
// configuration (one line on stderr naming the flag).
std::expected<Options, int> parseOptions(int argc, const char* const* argv);

// The checks that need no flag parser: the config path ends in .json, the lists are not
// empty, the backend command resolves to an executable. Resolves backendCommand[0]; the
// message names the flag.
Result<void> validateOptions(Options& options);

}  // namespace gvirtus::backend_shim
