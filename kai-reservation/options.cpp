#include "kai-reservation/options.h"

#include <cstdlib>

#include "common/contract/labels.h"

namespace gvirtus::kai_reservation {

std::expected<Options, int> parseOptions(int argc, const char* const* argv) {
  Options options;
  options.podName = envOr("POD_NAME");
  options.podNamespace = envOr("POD_NAMESPACE");
  options.vgpuIds = envOr(names::kVgpuIdsEnv);
  // KAI's binder runs the image without arguments and probes nothing: no listener unless
  // asked for.
  options.common.healthAddr.clear();
  FlagSet flags(kProgram,
                "KAI-Scheduler GPU reservation pod for GVirtuS virtual GPUs: writes the\n"
                "virtual device the kubelet gave this pod (" +
                    std::string(names::kVgpuIdsEnv) + ") as the pod's annotation\n" +
                    names::kKaiReservedGpuAnnotation +
                    ", which KAI's binder waits for before it binds GPU-fraction pods,\n"
                    "then holds the device until the pod is deleted.");
  addCommonFlags(flags, options.common);
  flags.addString("pod-name", &options.podName, "this pod's name (default $POD_NAME)");
  flags.addString("pod-namespace", &options.podNamespace,
                  "this pod's namespace (default $POD_NAMESPACE)");
  flags.addDuration("retry-for", &options.retryFor,
                    "how long API errors are retried before the program exits 1");
  if (auto code = parseCommandLine(flags, options.common, argc, argv)) {
    return std::unexpected(*code);
  }
  if (options.podName.empty()) {
    return std::unexpected(usageError(flags, "--pod-name: required (or set $POD_NAME)"));
  }
  if (options.podNamespace.empty()) {
    return std::unexpected(usageError(flags, "--pod-namespace: required (or set $POD_NAMESPACE)"));
  }
  if (options.retryFor.count() <= 0) {
    return std::unexpected(usageError(flags, "--retry-for: must be positive"));
  }
  return options;
}

}  // namespace gvirtus::kai_reservation
