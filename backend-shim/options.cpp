#include "backend-shim/options.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "backend-shim/backend/config.h"

namespace gvirtus::backend_shim {
namespace {

bool endsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The guard library beside this binary (kPeerGuardBeside).
std::string defaultPeerGuardLibrary() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    return "";
  }
  return (self.parent_path() / kPeerGuardBeside).lexically_normal().string();
}

// Makes --peer-guard-library absolute, the default one when it is empty.
Result<void> resolvePeerGuardLibrary(Options& options) {
  if (options.peerGuardLibrary.empty()) {
    options.peerGuardLibrary = defaultPeerGuardLibrary();
    if (options.peerGuardLibrary.empty()) {
      return fail("--peer-guard-library: cannot find this binary's folder (/proc/self/exe)");
    }
  }
  std::error_code ec;
  if (auto absolute = std::filesystem::absolute(options.peerGuardLibrary, ec); !ec) {
    options.peerGuardLibrary = absolute.string();
  }
  return {};
}

Result<void> validatePeerCheck(Options& options) {
  if (!options.peerCheck && options.sessions == kPerPodSessions) {
    // The guard hands each process its connections: per-pod sessions cannot run without it.
    if (auto resolved = resolvePeerGuardLibrary(options); !resolved) {
      return resolved;
    }
    return checkPeerGuardLibrary(options.peerGuardLibrary, "or pass --sessions=shared");
  }
  if (!options.peerCheck) {
    // The library is preloaded all the same when it is there (run.cpp); without it the
    // backend runs as before.
    (void)resolvePeerGuardLibrary(options);
    return {};
  }
  if (options.podName.empty() || options.podNamespace.empty()) {
    return fail(
        "--peer-check: needs this pod's name and namespace to read its gvirtus.io/peers "
        "annotation: set POD_NAME and POD_NAMESPACE (or --pod-name, --pod-namespace), or pass "
        "--peer-check=false");
  }
  if (options.peerWait.count() < 0 || options.peerWait > kMaxPeerWait) {
    return fail("--peer-wait: must be between 0s and " + formatDuration(kMaxPeerWait));
  }
  if (auto resolved = resolvePeerGuardLibrary(options); !resolved) {
    return resolved;
  }
  return checkPeerGuardLibrary(options.peerGuardLibrary, "or pass --peer-check=false");
}

}  // namespace

Result<void> checkPeerGuardLibrary(const std::string& library, const std::string& orElse) {
  // ld.so splits LD_PRELOAD at both.
  if (library.find_first_of(": ") != std::string::npos) {
    return fail("--peer-guard-library: " + library +
                ": a path with ':' or ' ' cannot be put in LD_PRELOAD");
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(library, ec)) {
    return fail("--peer-guard-library: " + library +
                " is not a file (stage libgvirtus-peer-guard.so there" +
                (orElse.empty() ? "" : ", " + orElse) + ")");
  }
  if (::access(library.c_str(), R_OK) != 0) {
    return fail("--peer-guard-library: cannot read " + library + ": " + std::strerror(errno) +
                (orElse.empty() ? "" : " (" + orElse + ")"));
  }
  return {};
}

Result<void> validateOptions(Options& options) {
  const std::string name = std::filesystem::path(options.configOut).filename().string();
  if (!endsWith(name, ".json") || name == ".json") {
    return fail(
        "--config-out: must be a file name ending in .json (gvirtus-backend takes no "
        "other), got \"" +
        options.configOut + "\"");
  }
  if (options.plugins.empty()) {
    return fail("--plugins: must name at least one plugin");
  }
  if (options.publishInterval.count() <= 0) {
    return fail("--publish-interval: must be more than 0s");
  }
  if (options.leakRestartMaxDefer.count() < 0) {
    return fail("--leak-restart-max-defer: must be 0s or more");
  }
  if (options.sessions != kPerPodSessions && options.sessions != kSharedSessions) {
    return fail("--sessions: must be per-pod or shared, got \"" + options.sessions + "\"");
  }
  if (options.backendSelector.empty()) {
    return fail("--backend-selector: must select the backend pods (a label selector)");
  }
  if (options.backendCommand.empty()) {
    if (options.gvirtusHome.empty()) {
      return fail(
          "no backend binary: set --gvirtus-home (or $GVIRTUS_HOME) or give the "
          "backend command after --");
    }
    options.backendCommand = {
        (std::filesystem::path(options.gvirtusHome) / "bin" / "gvirtus-backend").string()};
    auto resolved = resolveExecutable(options.backendCommand[0]);
    if (!resolved) {
      return fail("--gvirtus-home: no backend binary: " + resolved.error().message);
    }
    options.backendCommand[0] = *resolved;
    return validatePeerCheck(options);
  }
  auto resolved = resolveExecutable(options.backendCommand[0]);
  if (!resolved) {
    return fail("no backend binary: the command after --: " + resolved.error().message);
  }
  options.backendCommand[0] = *resolved;
  return validatePeerCheck(options);
}

namespace {

// The backend process: its port and plugins, where its configuration goes, its binary, how
// long it may take to start, to stop, to drain.
void addBackendFlags(FlagSet& flags, Options& options) {
  flags.addInt("port", &options.port, "TCP port the backend listens on", 1, 65535);
  flags.addList("plugins", &options.plugins, "GVirtuS plugins the backend loads, comma list");
  flags.addString("config-out", &options.configOut,
                  "where to write the backend's properties.json (must end in .json)");
  flags.addString("gvirtus-home", &options.gvirtusHome,
                  "GVirtuS install folder, from $GVIRTUS_HOME when unset: bin/gvirtus-backend "
                  "is the default backend, lib/ its LD_LIBRARY_PATH");
  flags.addDuration("startup-timeout", &options.startupTimeout,
                    "a backend whose port is not listening this long after it starts is "
                    "restarted");
  flags.addDuration("stop-timeout", &options.stopTimeout,
                    "time between SIGTERM and SIGKILL to the backend's process group");
  flags.addDuration("drain-timeout", &options.drainTimeout,
                    "on SIGTERM, how long to wait for the backend's connections to close");
}

// How frontend pods share the backend (--sessions) and how many it takes.
void addSessionFlags(FlagSet& flags, Options& options) {
  flags.addString("sessions", &options.sessions,
                  "per-pod: each frontend pod is served by a backend process of its own (its "
                  "own CUDA context; a crash ends only its pod's connections), started from a "
                  "pool and ended with the pod's last connection; shared: every pod by one "
                  "backend process, as GVirtuS alone does");
  flags.addInt("max-sessions", &options.maxSessions,
               "published as maxSessions for the webhook: with per-pod, the pods served at "
               "once, more refused at accept; with shared, the connections the webhook lets "
               "this backend take",
               1, 1000000);
  flags.addInt("session-pool", &options.sessionPool,
               "per-pod: backend processes started ahead, waiting for a pod", 1, 64);
  flags.addInt("max-connections-per-pod", &options.maxConnectionsPerPod,
               "per-pod: open connections one pod may hold (GVirtuS opens one per application "
               "thread); one more is refused at accept",
               1, 100000);
}

// The restart that frees the sockets GVirtuS leaks, and the other backends it waits for.
void addLeakRestartFlags(FlagSet& flags, Options& options) {
  flags.addInt("max-leaked-sockets", &options.maxLeakedSockets,
               "GVirtuS never closes a finished client's socket: past this many (CLOSE_WAIT), "
               "the backend is restarted as soon as no client is connected; 0: never",
               0, 1000000);
  flags.addDuration("leak-restart-max-defer", &options.leakRestartMaxDefer,
                    "a leak restart (--max-leaked-sockets) waits while no other backend pod "
                    "(--backend-selector) is Ready, so that backends never all restart "
                    "together; after this long it goes anyway (a cluster of one backend); 0: "
                    "never waits");
  flags.addString("backend-selector", &options.backendSelector,
                  "label selector of the backend pods in this pod's namespace, as the webhook's "
                  "--backend-selector: a leak restart waits for another of them to be Ready");
}

// This pod, on which the load is published, and the GPUs' numbers it publishes.
void addPodFlags(FlagSet& flags, Options& options) {
  flags.addString("pod-name", &options.podName,
                  "this pod's name, from $POD_NAME when unset: the load is published on it and, "
                  "with --peer-check, its gvirtus.io/peers read; without it the load is not "
                  "published");
  flags.addString("pod-namespace", &options.podNamespace,
                  "this pod's namespace, from $POD_NAMESPACE when unset");
  flags.addDuration("publish-interval", &options.publishInterval,
                    "least time between two writes of the gvirtus.io/load annotation");
  flags.addString("nvml-library", &options.nvmlLibrary,
                  "NVML library to load for the GPUs' numbers; when it cannot be loaded the "
                  "node reports no GPUs");
}

// Who may open a session, and what the guard preloaded into the backend fences off.
void addGuardFlags(FlagSet& flags, Options& options) {
  flags.addBool("peer-check", &options.peerCheck,
                "accept sessions only from the pods the webhook lists in this pod's "
                "gvirtus.io/peers annotation (a guard preloaded into the backend closes other "
                "connections before GVirtuS reads them); needs POD_NAME and POD_NAMESPACE");
  flags.addDuration("peer-wait", &options.peerWait,
                    "with --peer-check, how long a connection from an address not listed yet "
                    "waits for the annotation to list it (at most 1m)");
  flags.addString("peer-guard-library", &options.peerGuardLibrary,
                  "the library preloaded into the backend: the peer check's guard, which also "
                  "line-buffers the backend's stdout and makes its SO_REUSEADDR work (without "
                  "--peer-check a missing one is only a warning); empty: " +
                      std::string(kPeerGuardBeside) + " from this binary's folder");
  flags.addString("hide-from-backend", &options.hideFromBackend,
                  "a folder the backend processes may not read, fenced off by the guard with "
                  "Landlock (Linux 5.13 or later): this pod's ServiceAccount token, which may "
                  "write the load report, is kept from the process that parses tenants' bytes; "
                  "empty: nothing is hidden");
}

}  // namespace

std::expected<Options, int> parseOptions(int argc, const char* const* argv) {
  Options options;
  options.plugins = kDefaultPlugins;
  options.gvirtusHome = envOr("GVIRTUS_HOME");
  options.podName = envOr("POD_NAME");
  options.podNamespace = envOr("POD_NAMESPACE");

  FlagSet flags(kProgram,
                "Runs the GVirtuS backend in its own process group, restarts it when it exits or "
                "stops listening,\nmeasures its connections and GPUs, and publishes "
                "gvirtus.io/load on its own pod.\n\nThe backend command follows -- "
                "(default $GVIRTUS_HOME/bin/gvirtus-backend); the rendered config path\nis "
                "appended as its last argument.");
  addCommonFlags(flags, options.common);
  addBackendFlags(flags, options);
  addSessionFlags(flags, options);
  addLeakRestartFlags(flags, options);
  addPodFlags(flags, options);
  addGuardFlags(flags, options);

  if (auto stop = parseCommandLine(flags, options.common, argc, argv)) {
    return std::unexpected(*stop);
  }
  options.backendCommand = flags.rest();
  if (auto valid = validateOptions(options); !valid) {
    return std::unexpected(usageError(flags, valid.error().message));
  }
  return options;
}

}  // namespace gvirtus::backend_shim
