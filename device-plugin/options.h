#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/error.h"
#include "common/kube/connect.h"
#include "common/process/flags.h"

namespace gvirtus::device_plugin {

inline constexpr const char* kProgram = "gvirtus-device-plugin";
// More virtual GPUs than any node runs pods; a larger number is a typo.
inline constexpr int64_t kMaxDevices = 1024;

struct Options {
  CommonOptions common;
  std::string kubeletDir = "/var/lib/kubelet/device-plugins";
  std::string resource = "nvidia.com/gpu";
  int64_t devices = 8;
  bool cdi = true;
  std::string cdiDir = "/etc/cdi";
  std::string socketName = "gvirtus-vgpu.sock";
  // The DRA driver gpu.gvirtus.io (docs/dra.md), beside the device plugin.
  bool dra = false;
  // Its endpoint (dra.sock) and the prepared claims' files; the same path on the host.
  std::string draDir = "/var/lib/kubelet/plugins/gpu.gvirtus.io";
  // Where the kubelet looks for plugins' registration sockets.
  std::string pluginsRegistryDir = "/var/lib/kubelet/plugins_registry";
  // The GVirtuS frontend plugins a prepared claim's properties.json lists.
  std::vector<std::string> plugins;
  KubeApiLimits kubeApi{5, 10};
};

// The DRA driver's socket files.
inline constexpr const char* kDraSocketName = "dra.sock";
inline constexpr const char* kDraRegistrationSocketName = "gpu.gvirtus.io-reg.sock";

// Turns argv into Options. Returns the exit code to stop with instead when the program
// should not run: 0 after --help or --version, 2 after a bad flag or configuration (one
// line on stderr naming the flag).
std::expected<Options, int> parseOptions(int argc, const char* const* argv);

// The checks after parsing; the message names the flag. Touches no file.
Result<void> validateOptions(const Options& options);

}  // namespace gvirtus::device_plugin
