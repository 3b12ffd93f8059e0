#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/time/duration.h"

// Everything the GVirtuS backend is given: its properties.json, its command line and its
// environment (docs/backend.md, "GVirtuS facts").
namespace gvirtus::backend_shim {

// The plugins GVirtuS's own sample configuration lists, in its order.
inline const std::vector<std::string> kDefaultPlugins = {"cudart", "cublas",   "curand",   "cudnn",
                                                         "cufft",  "cusolver", "cusparse", "nvrtc",
                                                         "cuda",   "nvml"};

// The backend's properties.json: one tcp/ip communicator on 0.0.0.0:`port` with `plugins`,
// values as JSON strings, `secure_application` false. One line, keys in GVirtuS's order.
std::string renderBackendConfig(uint16_t port, const std::vector<std::string>& plugins);

// Writes `text` to `path` atomically (a temporary file beside it, then rename), creating
// missing parent folders.
Result<void> writeBackendConfig(const std::string& path, const std::string& text);

// The backend's argv: `command` with the config path appended, as gvirtus-backend takes it.
std::vector<std::string> backendArgv(std::vector<std::string> command,
                                     const std::string& configPath);

// The backend's environment: `base` (NAME=VALUE entries) with LD_LIBRARY_PATH set to
// `gvirtusHome`/lib alone (adding lib/frontend breaks the backend) and GVIRTUS_HOME set.
// With an empty `gvirtusHome` the base environment is passed unchanged.
std::vector<std::string> backendEnvironment(const std::vector<std::string>& base,
                                            const std::string& gvirtusHome);

// `base` with `library` preloaded: appended to any LD_PRELOAD already there. The shim
// preloads libgvirtus-peer-guard.so with or without --peer-check: it also line-buffers the
// backend's stdout and makes GVirtuS's SO_REUSEADDR work (backend-shim/peer_guard).
std::vector<std::string> withPreload(const std::vector<std::string>& base,
                                     const std::string& library);

// What the backend needs to run under the peer guard (--peer-check).
struct PeerGuardSettings {
  std::string library;  // libgvirtus-peer-guard.so, an absolute path
  std::string socket;   // the gate's unix socket
  uint16_t port = 0;    // the backend's port: its connections are checked
  Duration timeout;     // how long the guard waits for the gate's answer
};

// `base` with the guard preloaded: `guard.library` appended to any LD_PRELOAD already there,
// and GVIRTUS_PEER_GUARD_SOCKET, _PORT and _TIMEOUT_MS set (any earlier values replaced).
std::vector<std::string> withPeerGuard(const std::vector<std::string>& base,
                                       const PeerGuardSettings& guard);

// The current process's environment as NAME=VALUE entries.
std::vector<std::string> currentEnvironment();

// The absolute path `command` runs: itself when it holds a '/', else the first match on
// PATH. An error when it does not exist or is not an executable file.
Result<std::string> resolveExecutable(const std::string& command);

}  // namespace gvirtus::backend_shim
