#include "labeler/options.h"

#include <cstdlib>

namespace gvirtus::labeler {
namespace {

bool isBoolText(const std::string& v) {
  return v == "true" || v == "false";
}

}  // namespace

std::expected<Options, int> parseOptions(int argc, const char* const* argv) {
  Options options;
  if (const char* env = std::getenv("NODE_NAME"); env != nullptr) {
    options.nodeName = env;
  }
  FlagSet flags(kProgram,
                "Labels nodes with their GVirtuS roles (gvirtus.io/frontend.allowed, "
                "gvirtus.io/backend.allowed; only when missing) and gvirtus.io/gpu.present "
                "(always the detected truth). Watches its node and reacts to changes.");
  addCommonFlags(flags, options.common);
  flags.addString("node-name", &options.nodeName, "the node to label (default $NODE_NAME)");
  flags.addBool("all-nodes", &options.allNodes,
                "label every node from one process (for clusters that run it as a Deployment); "
                "GPU detection is then left to per-node labelers");
  flags.addBool("once", &options.once, "reconcile once and exit: 0 when done, 1 with the reason");
  flags.addString("default-frontend", &options.defaultFrontend,
                  "value of gvirtus.io/frontend.allowed written when the label is missing");
  flags.addString("default-backend", &options.defaultBackend,
                  "value of gvirtus.io/backend.allowed written when the label is missing; the "
                  "admission policy gvirtus-labeler-nodes lets only \"false\" through (operators "
                  "opt nodes in)");
  flags.addList("gpu-probe-paths", &options.gpuProbePaths,
                "a GPU is present when any of these paths exists");
  flags.addDuration("gpu-probe-interval", &options.gpuProbeInterval,
                    "how often the GPU probe paths are checked again");
  flags.addInt("workers", &options.workers, "nodes reconciled in parallel (with --all-nodes)", 1,
               64);
  addKubeApiFlags(flags, options.kubeApi);
  if (auto code = parseCommandLine(flags, options.common, argc, argv)) {
    return std::unexpected(*code);
  }
  if (!isBoolText(options.defaultFrontend)) {
    return std::unexpected(usageError(flags, "--default-frontend: must be true or false, got \"" +
                                                 options.defaultFrontend + "\""));
  }
  if (!isBoolText(options.defaultBackend)) {
    return std::unexpected(usageError(
        flags, "--default-backend: must be true or false, got \"" + options.defaultBackend + "\""));
  }
  if (options.allNodes && !options.nodeName.empty() && flags.wasSet("node-name")) {
    return std::unexpected(usageError(flags, "--node-name: cannot be combined with --all-nodes"));
  }
  if (!options.allNodes && options.nodeName.empty()) {
    return std::unexpected(
        usageError(flags, "--node-name: required (or set $NODE_NAME, or use --all-nodes)"));
  }
  if (options.gpuProbePaths.empty() && !options.allNodes) {
    return std::unexpected(usageError(flags, "--gpu-probe-paths: needs at least one path"));
  }
  if (options.gpuProbeInterval.count() < 100) {
    return std::unexpected(usageError(flags, "--gpu-probe-interval: must be at least 100ms"));
  }
  return options;
}

}  // namespace gvirtus::labeler
