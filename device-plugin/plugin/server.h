#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "common/base/error.h"
#include "device-plugin/plugin/device_list.h"

namespace gvirtus::device_plugin {

// Our answers to GetDevicePluginOptions, also sent with the registration.
inline constexpr bool kPreStartRequired = false;
inline constexpr bool kPreferredAllocationAvailable = true;

// Counts for /metrics, read from the health server's threads.
struct PluginCounters {
  std::atomic<uint64_t> registrations{0};
  std::atomic<bool> registered{false};
  std::atomic<uint64_t> allocations{0};
  std::atomic<uint64_t> rejectedAllocations{0};
  std::atomic<uint64_t> listAndWatchStreams{0};
};

// The DevicePlugin gRPC service on a unix socket: GetDevicePluginOptions, ListAndWatch
// (the device list, then the list again after each change), GetPreferredAllocation,
// Allocate and PreStartContainer. A request naming unknown devices, or more devices than
// exist, gets INVALID_ARGUMENT with the reason. gRPC stays inside the .cpp.
class PluginServer {
 public:
  struct Config {
    std::filesystem::path socket;
    bool cdi = true;
  };
  // Binds `config.socket`, which must not exist, and serves on gRPC's threads. `devices`
  // and `counters` must outlive the server.
  static Result<std::unique_ptr<PluginServer>> start(Config config, const DeviceList& devices,
                                                     PluginCounters& counters);
  // Ends open streams and stops serving; the socket file is left to the caller.
  ~PluginServer();
  PluginServer(const PluginServer&) = delete;
  PluginServer& operator=(const PluginServer&) = delete;

  const std::filesystem::path& socket() const;

  struct Impl;
  explicit PluginServer(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gvirtus::device_plugin
