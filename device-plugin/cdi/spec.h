#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/error.h"

// The CDI (Container Device Interface) spec of our virtual GPUs. The container runtime
// resolves the names Allocate returns ("gvirtus.io/vgpu=vgpu-0") against this file; each
// device only sets an environment variable, because a virtual GPU has no device node and
// no host file to mount.
namespace gvirtus::device_plugin {

inline constexpr const char* kCdiKind = "gvirtus.io/vgpu";
// Env edits need spec 0.3.0; 0.5.0 is the newest version that the CDI library of
// containerd 1.7.0 (v0.5.4) accepts, and every later one (containerd 2.x) still does.
inline constexpr const char* kCdiVersion = "0.5.0";
// "<vendor>-<class>.json", as CDI tools name their specs.
inline constexpr const char* kCdiSpecFileName = "gvirtus.io-vgpu.json";

// "gvirtus.io/vgpu=<id>".
std::string cdiDeviceName(std::string_view id);
// The one edit of a device: "GVIRTUS_VGPU_3=vgpu-3" for "vgpu-3".
std::string cdiDeviceEnv(std::string_view id);

// The spec as JSON text (valid YAML as well), one device per ID.
std::string renderCdiSpec(const std::vector<std::string>& ids);

// Writes the spec to dir/kCdiSpecFileName atomically (a temporary file in the same folder,
// synced, then renamed over it), creating the folder when missing. A file with the same
// content is left alone. Returns the path.
Result<std::filesystem::path> writeCdiSpec(const std::filesystem::path& dir,
                                           const std::vector<std::string>& ids);

}  // namespace gvirtus::device_plugin
