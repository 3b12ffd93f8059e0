#include "device-plugin/plugin/server.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/telemetry/log.h"
#include "device-plugin/plugin/allocation.h"
#include "deviceplugin_v1beta1.grpc.pb.h"

namespace gvirtus::device_plugin {
namespace {

using namespace std::chrono_literals;

// How often a quiet ListAndWatch stream looks whether the kubelet went away; stopping the
// server wakes it at once.
constexpr auto kStreamPoll = 1s;
// How long stopping waits for handlers before cancelling them.
constexpr auto kShutdownGrace = 2s;

std::vector<std::string> toVector(const google::protobuf::RepeatedPtrField<std::string>& ids) {
  return {ids.begin(), ids.end()};
}

grpc::Status invalidArgument(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

class DevicePluginService final : public v1beta1::DevicePlugin::Service {
 public:
  DevicePluginService(const DeviceList& devices, bool cdi, PluginCounters& counters)
      : devices_(devices), cdi_(cdi), counters_(counters) {}

  // Makes open ListAndWatch streams return now.
  void beginStop() {
    stopping_ = true;
    devices_.wakeWaiters();
  }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* options) override {
    options->set_pre_start_required(kPreStartRequired);
    options->set_get_preferred_allocation_available(kPreferredAllocationAvailable);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    counters_.listAndWatchStreams.fetch_add(1);
    uint64_t sent = 0;
    DeviceList::Snapshot snapshot = devices_.snapshot();
    while (!stopping_ && !context->IsCancelled()) {
      if (snapshot.version > sent) {
        v1beta1::ListAndWatchResponse response;
        size_t healthy = 0;
        for (const auto& device : snapshot.devices) {
          auto* out = response.add_devices();
          out->set_id(device.id);
          out->set_health(device.healthy ? "Healthy" : "Unhealthy");
          healthy += device.healthy ? 1 : 0;
        }
        if (!writer->Write(response)) {
          log::debug("ListAndWatch stream closed by the kubelet");
          return grpc::Status::OK;
        }
        log::info("sent the device list", {{"devices", snapshot.devices.size()},
                                           {"healthy", healthy},
                                           {"version", snapshot.version}});
        sent = snapshot.version;
      }
      snapshot = devices_.waitForChange(sent, kStreamPoll, &stopping_);
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* response) override {
    for (const auto& container : request->container_requests()) {
      auto chosen = preferredAllocation(devices_.ids(), toVector(container.available_deviceids()),
                                        toVector(container.must_include_deviceids()),
                                        container.allocation_size());
      if (!chosen) {
        log::warn("rejected a preferred allocation request", {{"reason", chosen.error().message}});
        return invalidArgument(chosen.error().message);
      }
      auto* out = response->add_container_responses();
      for (const auto& id : *chosen) {
        out->add_deviceids(id);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override {
    for (const auto& container : request->container_requests()) {
      const auto requested = toVector(container.devices_ids());
      auto allocation = allocateContainer(devices_.ids(), requested, cdi_);
      if (!allocation) {
        counters_.rejectedAllocations.fetch_add(1);
        log::warn("rejected an allocation",
                  {{"devices", requested}, {"reason", allocation.error().message}});
        return invalidArgument(allocation.error().message);
      }
      auto* out = response->add_container_responses();
      for (const auto& [name, value] : allocation->env) {
        (*out->mutable_envs())[name] = value;
      }
      for (const auto& name : allocation->cdiDevices) {
        out->add_cdi_devices()->set_name(name);
      }
    }
    for (const auto& container : request->container_requests()) {
      counters_.allocations.fetch_add(1);
      log::info("allocated virtual GPUs", {{"devices", toVector(container.devices_ids())}});
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  const DeviceList& devices_;
  const bool cdi_;
  PluginCounters& counters_;
  std::atomic<bool> stopping_{false};
};

}  // namespace

struct PluginServer::Impl {
  std::filesystem::path socket;
  std::unique_ptr<DevicePluginService> service;
  std::unique_ptr<grpc::Server> server;
};

Result<std::unique_ptr<PluginServer>> PluginServer::start(Config config, const DeviceList& devices,
                                                          PluginCounters& counters) {
  auto impl = std::make_unique<Impl>();
  impl->socket = std::move(config.socket);
  impl->service = std::make_unique<DevicePluginService>(devices, config.cdi, counters);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + impl->socket.string(), grpc::InsecureServerCredentials());
  builder.RegisterService(impl->service.get());
  impl->server = builder.BuildAndStart();
  if (!impl->server) {
    return fail("cannot serve gRPC on unix socket " + impl->socket.string());
  }
  return std::make_unique<PluginServer>(std::move(impl));
}

PluginServer::PluginServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PluginServer::~PluginServer() {
  impl_->service->beginStop();
  impl_->server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  impl_->server->Wait();
}

const std::filesystem::path& PluginServer::socket() const {
  return impl_->socket;
}

}  // namespace gvirtus::device_plugin
