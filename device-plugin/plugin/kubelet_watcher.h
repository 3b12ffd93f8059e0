#pragma once

#include <filesystem>
#include <stop_token>
#include <string>

#include "common/base/error.h"
#include "common/base/unique_fd.h"
#include "common/time/duration.h"

namespace gvirtus::device_plugin {

// Watches the kubelet's device-plugins folder with inotify for what a kubelet restart
// does there: it deletes every socket in the folder (ours too) and creates kubelet.sock
// again.
class KubeletWatcher {
 public:
  static constexpr const char* kKubeletSocket = "kubelet.sock";

  struct Events {
    bool kubeletSocketCreated = false;
    bool kubeletSocketRemoved = false;
    bool pluginSocketRemoved = false;
    // Events were lost or the folder itself went away: look at everything again.
    bool overflow = false;

    bool any() const {
      return kubeletSocketCreated || kubeletSocketRemoved || pluginSocketRemoved || overflow;
    }
  };

  static Result<KubeletWatcher> open(std::filesystem::path dir, std::string pluginSocketName);

  // Waits until something happens in the folder, `timeout` passes or `stop` is requested,
  // and returns what happened (nothing on timeout or stop). A folder that was removed is
  // watched again once it is back.
  Result<Events> wait(Duration timeout, std::stop_token stop);

 private:
  KubeletWatcher(std::filesystem::path dir, std::string pluginSocketName, UniqueFd inotify,
                 UniqueFd wake);
  Result<void> addWatch();
  Events readEvents();

  std::filesystem::path dir_;
  std::string pluginSocketName_;
  UniqueFd inotify_;
  UniqueFd wake_;  // an eventfd that stop requests write to
  int watch_ = -1;
};

}  // namespace gvirtus::device_plugin
