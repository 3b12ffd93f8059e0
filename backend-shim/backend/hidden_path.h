#pragma once

#include <string>
#include <vector>

// The shim's side of the guard's fence (peer_guard/path_fence.cpp): the backend processes
// may not read one folder, by default this pod's ServiceAccount token (--hide-from-backend).
namespace gvirtus::backend_shim {

// `env` with the guard told to fence off `path`; unchanged when `path` is empty.
std::vector<std::string> withHiddenPath(std::vector<std::string> env, const std::string& path);

// Landlock's ABI version on this kernel, 0 when it is not there (an old kernel, Landlock
// not enabled, or a seccomp profile that refuses its calls).
int landlockAbi();

// Says once, at start, whether the backend processes will be kept from `path`: an info
// line when the guard is preloaded and Landlock is there, else a warning with the reason.
void logPathFence(const std::string& path, bool guardPreloaded);

}  // namespace gvirtus::backend_shim
