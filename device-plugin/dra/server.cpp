#include "device-plugin/dra/server.h"

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "common/base/unique_fd.h"
#include "common/contract/dra_names.h"
#include "common/telemetry/log.h"
#include "common/time/stoppable_sleep.h"
#include "device-plugin/plugin/supervisor.h"  // identify(), FileIdentity
#include "dra_v1.grpc.pb.h"
#include "pluginregistration_v1.grpc.pb.h"

namespace gvirtus::device_plugin {
namespace {

using namespace std::chrono_literals;
namespace drapb = k8s::io::kubelet::pkg::apis::dra::v1;

constexpr auto kShutdownGrace = 2s;
// More claims in one call than a node runs pods is not the kubelet.
constexpr int kMaxClaimsPerCall = 1024;

// Whether the file at `path` is still the socket we bound (held: identify() at bind time).
// While bound, its inode stays ours: device and inode alone name it (FileIdentity::sameFile).
bool stillOurs(const std::filesystem::path& path, const std::optional<FileIdentity>& held) {
  const auto now = identify(path);
  return held && now && now->sameFile(*held);
}

// True when something accepts connections on the unix socket at `path`.
bool socketAnswers(const std::filesystem::path& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string text = path.string();
  if (!fd.valid() || text.size() >= sizeof(address.sun_path)) {
    return false;
  }
  std::copy(text.begin(), text.end(), address.sun_path);
  return ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
}

// A socket left by an earlier run (nothing answers on it) is ours to replace; one another
// process serves (a second instance) or anything else under the name is not.
Result<void> clearSocketPath(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) {
    return fail("create " + path.parent_path().string() + ": " + ec.message());
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return {};
  }
  if (!S_ISSOCK(st.st_mode)) {
    return fail(path.string() + " exists and is not a socket");
  }
  if (socketAnswers(path)) {
    return fail(path.string() + " is served by another process (a second instance?)");
  }
  std::filesystem::remove(path, ec);
  if (ec) {
    return fail("remove the old socket " + path.string() + ": " + ec.message());
  }
  return {};
}

std::vector<ClaimRef> claimRefs(const google::protobuf::RepeatedPtrField<drapb::Claim>& claims) {
  std::vector<ClaimRef> refs;
  refs.reserve(static_cast<size_t>(claims.size()));
  for (const auto& claim : claims) {
    refs.push_back({claim.namespace_(), claim.name(), claim.uid()});
  }
  return refs;
}

class DraService final : public drapb::DRAPlugin::Service {
 public:
  DraService(ClaimPreparer& preparer, DraCounters& counters)
      : preparer_(preparer), counters_(counters) {}

  grpc::Status NodePrepareResources(grpc::ServerContext*,
                                    const drapb::NodePrepareResourcesRequest* request,
                                    drapb::NodePrepareResourcesResponse* response) override {
    if (request->claims_size() > kMaxClaimsPerCall) {
      return tooMany(request->claims_size());
    }
    for (auto& [uid, result] : preparer_.prepare(claimRefs(request->claims()))) {
      auto& out = (*response->mutable_claims())[uid];
      if (!result) {
        counters_.prepareErrors.fetch_add(1);
        log::warn("cannot prepare claim", {{"uid", uid}, {"error", result.error().message}});
        out.set_error(result.error().message);
        continue;
      }
      counters_.prepared.fetch_add(1);
      auto* device = out.add_devices();
      device->add_request_names(result->allocated.request);
      device->set_pool_name(result->allocated.pool);
      device->set_device_name(result->allocated.device);
      device->add_cdi_device_ids(result->cdiDevice);
      if (result->allocated.shareId) {
        device->set_share_id(*result->allocated.shareId);
      }
      log::info("claim prepared",
                {{"uid", uid},
                 {"device", result->allocated.pool + "/" + result->allocated.device},
                 {"cdiDevice", result->cdiDevice}});
    }
    return grpc::Status::OK;
  }

  grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                      const drapb::NodeUnprepareResourcesRequest* request,
                                      drapb::NodeUnprepareResourcesResponse* response) override {
    if (request->claims_size() > kMaxClaimsPerCall) {
      return tooMany(request->claims_size());
    }
    for (auto& [uid, result] : preparer_.unprepare(claimRefs(request->claims()))) {
      auto& out = (*response->mutable_claims())[uid];
      if (!result) {
        log::warn("cannot unprepare claim", {{"uid", uid}, {"error", result.error().message}});
        out.set_error(result.error().message);
        continue;
      }
      counters_.unprepared.fetch_add(1);
      log::info("claim unprepared", {{"uid", uid}});
    }
    return grpc::Status::OK;
  }

 private:
  static grpc::Status tooMany(int count) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::to_string(count) +
                                                                " claims in one call; at most " +
                                                                std::to_string(kMaxClaimsPerCall));
  }

  // Calls run side by side: the kubelet never prepares and unprepares one claim at once,
  // and each file is replaced whole (common/base/atomic_file.h).
  ClaimPreparer& preparer_;
  DraCounters& counters_;
};

class RegistrationService final : public pluginregistration::Registration::Service {
 public:
  RegistrationService(std::string endpoint, DraCounters& counters)
      : endpoint_(std::move(endpoint)), counters_(counters) {}

  grpc::Status GetInfo(grpc::ServerContext*, const pluginregistration::InfoRequest*,
                       pluginregistration::PluginInfo* info) override {
    info->set_type(kDraPluginType);
    info->set_name(dra::kDriver);
    info->set_endpoint(endpoint_);
    info->add_supported_versions(kDraService);
    return grpc::Status::OK;
  }

  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*,
                                        const pluginregistration::RegistrationStatus* status,
                                        pluginregistration::RegistrationStatusResponse*) override {
    counters_.registered.store(status->plugin_registered());
    if (status->plugin_registered()) {
      counters_.registrations.fetch_add(1);
      log::info("registered with the kubelet as a DRA driver",
                {{"driver", dra::kDriver}, {"endpoint", endpoint_}});
    } else {
      log::error("the kubelet refused the DRA driver's registration",
                 {{"driver", dra::kDriver}, {"error", status->error()}});
    }
    return grpc::Status::OK;
  }

 private:
  const std::string endpoint_;
  DraCounters& counters_;
};

std::unique_ptr<grpc::Server> serve(const std::filesystem::path& socket, grpc::Service* service) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket.string(), grpc::InsecureServerCredentials());
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

}  // namespace

struct DraServer::Impl {
  Config config;
  DraCounters* counters = nullptr;
  std::unique_ptr<DraService> dra;
  std::unique_ptr<RegistrationService> registration;
  std::unique_ptr<grpc::Server> draServer;
  std::unique_ptr<grpc::Server> registrationServer;
  std::optional<FileIdentity> pluginSocket;
  std::optional<FileIdentity> registrationSocket;
};

Result<std::unique_ptr<DraServer>> DraServer::start(Config config, ClaimPreparer& preparer,
                                                    DraCounters& counters) {
  for (const auto* path : {&config.pluginSocket, &config.registrationSocket}) {
    if (auto cleared = clearSocketPath(*path); !cleared) {
      return fail(cleared.error());
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  impl->counters = &counters;
  impl->dra = std::make_unique<DraService>(preparer, counters);
  impl->registration =
      std::make_unique<RegistrationService>(impl->config.pluginSocket.string(), counters);
  impl->draServer = serve(impl->config.pluginSocket, impl->dra.get());
  if (!impl->draServer) {
    return fail("cannot serve gRPC on unix socket " + impl->config.pluginSocket.string());
  }
  impl->pluginSocket = identify(impl->config.pluginSocket);
  impl->registrationServer = serve(impl->config.registrationSocket, impl->registration.get());
  if (!impl->registrationServer) {
    return fail("cannot serve gRPC on unix socket " + impl->config.registrationSocket.string());
  }
  impl->registrationSocket = identify(impl->config.registrationSocket);
  return std::make_unique<DraServer>(std::move(impl));
}

DraServer::DraServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DraServer::~DraServer() {
  // The registration socket's file goes first: its removal is what tells the kubelet that
  // the driver is gone, so it stops sending work before the endpoint closes. Each file only
  // while it is still the one we bound.
  std::error_code ec;
  if (stillOurs(impl_->config.registrationSocket, impl_->registrationSocket)) {
    std::filesystem::remove(impl_->config.registrationSocket, ec);
  }
  for (auto* server : {impl_->registrationServer.get(), impl_->draServer.get()}) {
    if (server) {
      server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
      server->Wait();
    }
  }
  impl_->counters->registered.store(false);
  if (stillOurs(impl_->config.pluginSocket, impl_->pluginSocket)) {
    std::filesystem::remove(impl_->config.pluginSocket, ec);
  }
}

bool DraServer::socketsIntact() const {
  return stillOurs(impl_->config.pluginSocket, impl_->pluginSocket) &&
         stillOurs(impl_->config.registrationSocket, impl_->registrationSocket);
}

void serveDra(const DraServer::Config& config, ClaimPreparer& preparer, DraCounters& counters,
              std::stop_token stop, Duration resync) {
  std::unique_ptr<DraServer> server;
  std::string lastError;
  do {
    if (server && !server->socketsIntact()) {
      log::warn("a DRA driver socket was removed or replaced: serving again",
                {{"registration", config.registrationSocket.string()},
                 {"endpoint", config.pluginSocket.string()}});
      server.reset();
    }
    if (!server) {
      auto started = DraServer::start(config, preparer, counters);
      if (started) {
        server = std::move(*started);
        lastError.clear();
        log::info("DRA driver serving", {{"driver", dra::kDriver},
                                         {"registration", config.registrationSocket.string()},
                                         {"endpoint", config.pluginSocket.string()}});
      } else if (started.error().message != lastError) {
        lastError = started.error().message;
        log::error("cannot serve the DRA driver", {{"error", lastError}});
      }
    }
  } while (sleepUnlessStopped(stop, resync));
}

}  // namespace gvirtus::device_plugin
