#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <stop_token>

#include "common/base/error.h"
#include "common/time/duration.h"
#include "device-plugin/dra/claim_preparer.h"

// The kubelet side of the DRA driver gpu.gvirtus.io (--dra): the plugin registration
// service on a socket in the kubelet's plugins_registry folder, which the kubelet finds by
// itself, and the DRA service v1 (NodePrepareResources, NodeUnprepareResources) on the
// endpoint that registration names. gRPC stays inside the .cpp.
namespace gvirtus::device_plugin {

// The registration's plugin type and the one service we serve.
inline constexpr const char* kDraPluginType = "DRAPlugin";
inline constexpr const char* kDraService = "v1.DRAPlugin";

// Counts for /metrics, read from the health server's threads.
struct DraCounters {
  std::atomic<bool> registered{false};
  std::atomic<uint64_t> registrations{0};
  std::atomic<uint64_t> prepared{0};
  std::atomic<uint64_t> prepareErrors{0};
  std::atomic<uint64_t> unprepared{0};
};

class DraServer {
 public:
  struct Config {
    std::filesystem::path registrationSocket;  // absolute, in plugins_registry
    std::filesystem::path pluginSocket;        // absolute: the endpoint the kubelet dials
  };
  // Replaces a socket file an earlier run left at either path (one nothing answers on; a
  // live one is another instance's, and an error), then serves the DRA service and after it
  // the registration (the kubelet dials the endpoint as soon as it reads it).
  // `preparer` and `counters` must outlive the server.
  static Result<std::unique_ptr<DraServer>> start(Config config, ClaimPreparer& preparer,
                                                  DraCounters& counters);
  // Removes the registration socket (the kubelet takes its going as the driver's), stops
  // serving, and removes the endpoint's socket.
  ~DraServer();
  DraServer(const DraServer&) = delete;
  DraServer& operator=(const DraServer&) = delete;

  // False once either socket file is gone or is another one than we bound (someone deleted
  // or replaced it): the caller starts a new server.
  bool socketsIntact() const;

  struct Impl;
  explicit DraServer(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// Keeps a DraServer serving until `stop`: starts one, and a new one whenever its sockets
// are found gone or replaced (a look every `resync`), after a failed start too.
void serveDra(const DraServer::Config& config, ClaimPreparer& preparer, DraCounters& counters,
              std::stop_token stop, Duration resync = std::chrono::seconds(5));

}  // namespace gvirtus::device_plugin
