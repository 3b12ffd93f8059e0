#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/process/flags.h"
#include "common/time/duration.h"

namespace gvirtus::backend_shim {

inline constexpr const char* kProgram = "gvirtus-backend-shim";
inline constexpr const char* kPerPodSessions = "per-pod";
inline constexpr const char* kSharedSessions = "shared";
// Where the peer guard is staged, from the folder of the shim's binary: the image has
// /opt/gvirtus-k8s/{bin,preload}, the build tree <build>/{bin,preload}.
inline constexpr const char* kPeerGuardBeside = "../preload/libgvirtus-peer-guard.so";
// The longest --peer-wait: the backend's accept waits that long for an unlisted address.
inline constexpr auto kMaxPeerWait = std::chrono::minutes(1);

struct Options {
  CommonOptions common;
  uint16_t port = 9999;
  std::vector<std::string> plugins;
  std::string configOut = "/tmp/gvirtus/properties.json";
  // How connections are served: kPerPodSessions, each frontend pod by a backend process of
  // its own (SessionHost), or kSharedSessions, every pod by one backend process (Supervisor).
  std::string sessions = "per-pod";
  // Pods served at once (per-pod), or connections (shared); published as maxSessions.
  int maxSessions = 16;
  int sessionPool = 2;            // per-pod: processes started and waiting for a pod
  int maxConnectionsPerPod = 64;  // per-pod: GVirtuS opens one per application thread
  int maxLeakedSockets = 256;     // 0: never restart for leaked sockets
  // A leak restart waits while no other backend pod (--backend-selector) is Ready, at most
  // this long; 0: it never waits (LeakRestartGate).
  Duration leakRestartMaxDefer = std::chrono::minutes(5);
  std::string backendSelector = "app.kubernetes.io/component=backend";
  Duration publishInterval = std::chrono::seconds(5);
  Duration drainTimeout = std::chrono::seconds(30);
  Duration stopTimeout = std::chrono::seconds(5);
  Duration startupTimeout = std::chrono::minutes(1);
  std::string gvirtusHome;   // default $GVIRTUS_HOME
  std::string podName;       // default $POD_NAME; empty: the load is not published
  std::string podNamespace;  // default $POD_NAMESPACE
  std::string nvmlLibrary = "libnvidia-ml.so.1";
  // Sessions only from the pods listed in this pod's gvirtus.io/peers (the peer guard).
  bool peerCheck = true;
  Duration peerWait = std::chrono::seconds(3);
  // Empty: kPeerGuardBeside, from the folder of this binary (resolved by validateOptions).
  std::string peerGuardLibrary;
  // A directory the backend processes may not read (the guard fences it off with Landlock);
  // empty: none. Default: where the kubelet mounts this pod's ServiceAccount token.
  std::string hideFromBackend = "/var/run/secrets/kubernetes.io/serviceaccount";
  // The backend command without the config path; [0] resolved to an executable path.
  std::vector<std::string> backendCommand;
};

// Turns argv and the environment into Options. Returns the exit code to stop with instead
// when the program should not run: 0 after --help or --version, 2 after a bad flag or a bad
// configuration (one line on stderr naming the flag).
std::expected<Options, int> parseOptions(int argc, const char* const* argv);

// The checks that need no flag parser: the config path ends in .json, the lists are not
// empty, the backend command resolves to an executable, and with --peer-check the pod is
// named and the guard library readable. Resolves backendCommand[0] and peerGuardLibrary;
// the message names the flag.
Result<void> validateOptions(Options& options);

// Whether `library` can be preloaded: a readable file whose path LD_PRELOAD can hold. The
// message names --peer-guard-library and ends with `orElse` (another way out), if any.
Result<void> checkPeerGuardLibrary(const std::string& library, const std::string& orElse = "");

}  // namespace gvirtus::backend_shim
