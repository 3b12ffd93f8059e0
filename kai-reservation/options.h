#pragma once

#include <expected>
#include <string>

#include "common/process/flags.h"
#include "common/time/duration.h"

namespace gvirtus::kai_reservation {

inline constexpr const char* kProgram = "gvirtus-kai-reservation";

struct Options {
  CommonOptions common;
  std::string podName;       // default $POD_NAME (KAI's binder sets it)
  std::string podNamespace;  // default $POD_NAMESPACE
  std::string vgpuIds;       // $GVIRTUS_VGPU_IDS, from the device plugin's Allocate
  // How long to keep retrying the annotation before giving up (the pod then restarts).
  Duration retryFor = std::chrono::minutes(1);
};

// Parses argv into Options. Returns an exit code when the program must stop (help,
// version: 0; a bad flag or configuration: 2 with a one-line reason on stderr).
std::expected<Options, int> parseOptions(int argc, const char* const* argv);

}  // namespace gvirtus::kai_reservation
