#include "backend-shim/options.h"

#include <cstdlib>
#include <filesystem>

#include "backend-shim/backend_config.h"

namespace gvirtus::backend_shim {
namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

bool endsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

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
    return {};
  }
  auto resolved = resolveExecutable(options.backendCommand[0]);
  if (!resolved) {
    return fail("no backend binary: the command after --: " + resolved.error().message);
  }
  options.backendCommand[0] = *resolved;
  return {};
}

std::expected<Options, int> parseOptions(int argc, const char* const* argv) {
  Options options;
  options.plugins = kDefaultPlugins;
  options.gvirtusHome = env("GVIRTUS_HOME");
  options.podName = env("POD_NAME");
  options.podNamespace = env("POD_NAMESPACE");

  FlagSet flags(kProgram,
                "Runs the GVirtuS backend in its own process group, restarts it when it exits or "
                "stops listening,\nmeasures its connections and GPUs, and publishes "
                "gvirtus.io/load on its own pod.\n\nThe backend command follows -- "
                "(default $GVIRTUS_HOME/bin/gvirtus-backend); the rendered config path\nis "
                "appended as its last argument.");
  addCommonFlags(flags, options.common);
  flags.addInt("port", &options.port, "TCP port the backend listens on", 1, 65535);
  flags.addList("plugins", &options.plugins, "GVirtuS plugins the backend loads, comma list");
  flags.addString("config-out", &options.configOut,
                  "where to write the backend's properties.json (must end in .json)");
  flags.addInt("max-sessions", &options.maxSessions,
               "connections this backend takes; published as maxSessions for the webhook", 1,
               1000000);
  flags.addInt("max-leaked-sockets", &options.maxLeakedSockets,
               "GVirtuS never closes a finished client's socket: past this many (CLOSE_WAIT), "
               "the backend is restarted as soon as no client is connected; 0: never",
               0, 1000000);
  flags.addDuration("publish-interval", &options.publishInterval,
                    "least time between two writes of the gvirtus.io/load annotation");
  flags.addDuration("drain-timeout", &options.drainTimeout,
                    "on SIGTERM, how long to wait for the backend's connections to close");
  flags.addDuration("stop-timeout", &options.stopTimeout,
                    "time between SIGTERM and SIGKILL to the backend's process group");
  flags.addDuration("startup-timeout", &options.startupTimeout,
                    "a backend whose port is not listening this long after it starts is "
                    "restarted");
  flags.addString("gvirtus-home", &options.gvirtusHome,
                  "GVirtuS install folder, from $GVIRTUS_HOME when unset: bin/gvirtus-backend "
                  "is the default backend, lib/ its LD_LIBRARY_PATH");
  flags.addString("pod-name", &options.podName,
                  "this pod's name, from $POD_NAME when unset; without it the load is not "
                  "published");
  flags.addString("pod-namespace", &options.podNamespace,
                  "this pod's namespace, from $POD_NAMESPACE when unset");

  flags.addString("nvml-library", &options.nvmlLibrary,
                  "NVML library to load for the GPUs' numbers; when it cannot be loaded the "
                  "node reports no GPUs");

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
