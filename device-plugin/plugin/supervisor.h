#pragma once

#include <sys/types.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "common/base/error.h"
#include "common/time/backoff.h"
#include "common/time/duration.h"
#include "device-plugin/plugin/device_list.h"
#include "device-plugin/plugin/server.h"

namespace gvirtus::device_plugin {

// Which file a path names. A bound unix socket keeps its inode alive, so while a server
// listens, device and inode alone name its socket file (sameFile). Once that server has
// gone its inode may be reused: a socket deleted and created again under the same name (a
// kubelet restart) is told apart by its change time as well (==).
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  std::timespec changed{};

  bool sameFile(const FileIdentity& other) const {
    return device == other.device && inode == other.inode;
  }
  bool operator==(const FileIdentity& other) const;
};
std::optional<FileIdentity> identify(const std::filesystem::path& path);

struct SupervisorConfig {
  // Absolute.
  std::filesystem::path kubeletDir;
  std::string socketName;
  std::string resource;
  bool cdi = true;
  Duration registerTimeout = std::chrono::seconds(10);
  // A look at both sockets even when inotify says nothing.
  Duration resyncInterval = std::chrono::seconds(5);
  Duration retryInitial = std::chrono::milliseconds(100);
  Duration retryMax = std::chrono::seconds(3);
};

// Keeps our socket served and registered with the kubelet. Each pass compares what is on
// disk with what we served and registered with, and repairs the difference: our socket
// gone (the kubelet deletes it when it starts) means serve again and re-register;
// kubelet.sock created again means re-register; a socket of ours left by an earlier run is
// replaced. When another process puts its own socket under our name, we step back rather
// than fight over it. Single-threaded: run() does all the work.
class PluginSupervisor {
 public:
  // `devices` and `counters` outlive the supervisor; `onReady` hears when we become
  // registered (true) or stop being registered (false).
  PluginSupervisor(SupervisorConfig config, const DeviceList& devices, PluginCounters& counters,
                   std::function<void(bool)> onReady = {});
  // Stops serving and removes our socket when it is still ours.
  ~PluginSupervisor();
  PluginSupervisor(const PluginSupervisor&) = delete;
  PluginSupervisor& operator=(const PluginSupervisor&) = delete;

  // Serves, registers and watches until `stop` is requested. Errors only when the folder
  // cannot be watched or served at all at start.
  Result<void> run(std::stop_token stop);

  // One pass, without waiting. `kubeletRestarted` (kubelet.sock was created) skips the
  // wait before a registration retry.
  void reconcile(bool kubeletRestarted);
  bool registered() const { return registered_; }
  bool serving() const { return server_ != nullptr; }
  // Until the next pass is due (a registration retry), at most the resync interval.
  Duration nextPassIn() const;

 private:
  std::filesystem::path socketPath() const;
  std::filesystem::path kubeletSocketPath() const;
  Result<void> serve();
  void stopServing();
  void reconcileServing();
  void reconcileRegistration();
  void setRegistered(bool registered);

  SupervisorConfig config_;
  const DeviceList& devices_;
  PluginCounters& counters_;
  std::function<void(bool)> onReady_;
  Backoff retry_;

  std::unique_ptr<PluginServer> server_;
  std::optional<FileIdentity> served_;  // our socket as we created it
  bool steppedBack_ = false;            // another process holds our socket name
  bool registered_ = false;
  std::optional<FileIdentity> registeredWith_;  // kubelet.sock as it was then
  // When the last failure (to serve or to register) is tried again; none while nothing
  // failed or while we wait for kubelet.sock to appear.
  std::optional<std::chrono::steady_clock::time_point> retryAt_;
};

}  // namespace gvirtus::device_plugin
