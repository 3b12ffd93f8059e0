#pragma once

#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "common/kube/connect.h"
#include "common/process/flags.h"
#include "common/time/duration.h"

namespace gvirtus::labeler {

inline constexpr const char* kProgram = "gvirtus-labeler";

struct Options {
  CommonOptions common;
  std::string nodeName;  // default $NODE_NAME
  bool allNodes = false;
  bool once = false;
  std::string defaultFrontend = "true";
  std::string defaultBackend = "false";
  std::vector<std::string> gpuProbePaths{"/proc/driver/nvidia/gpus", "/dev/nvidiactl"};
  Duration gpuProbeInterval = std::chrono::seconds(30);
  int64_t workers = 1;
  KubeApiLimits kubeApi;  // 20 QPS, burst 40
};

// Parses argv into Options. Returns an exit code when the program must stop (help,
// version: 0; a bad flag or configuration: 2 with a one-line reason on stderr).
std::expected<Options, int> parseOptions(int argc, const char* const* argv);

}  // namespace gvirtus::labeler
