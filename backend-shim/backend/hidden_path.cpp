#include "backend-shim/backend/hidden_path.h"

#include <linux/landlock.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend-shim/peer_guard/peer_guard_protocol.h"
#include "common/telemetry/log.h"

namespace gvirtus::backend_shim {

std::vector<std::string> withHiddenPath(std::vector<std::string> env, const std::string& path) {
  if (path.empty()) {
    return env;
  }
  const std::string name = std::string(peer_guard::kHiddenPathEnv) + "=";
  std::erase_if(env, [&](const std::string& entry) { return entry.starts_with(name); });
  env.push_back(name + path);
  return env;
}

int landlockAbi() {
  const long abi =
      syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

void logPathFence(const std::string& path, bool guardPreloaded) {
  if (path.empty()) {
    log::warn("--hide-from-backend is empty: the backend processes can read this pod's token");
    return;
  }
  if (!guardPreloaded) {
    log::warn("the backend runs without the guard library: it can read the hidden folder",
              {{"path", path}});
    return;
  }
  if (const int abi = landlockAbi(); abi > 0) {
    log::info("the backend processes cannot read the hidden folder (Landlock)",
              {{"path", path}, {"landlockAbi", abi}});
  } else {
    log::warn(
        "Landlock is not available (Linux 5.13 or later, and a seccomp profile that allows it): "
        "the backend processes can read the hidden folder",
        {{"path", path}});
  }
}

}  // namespace gvirtus::backend_shim
