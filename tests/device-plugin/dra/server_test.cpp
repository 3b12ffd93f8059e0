#include "device-plugin/dra/server.h"

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <thread>

#include "device-plugin/dra_test_support.h"
#include "dra_v1.grpc.pb.h"
#include "pluginregistration_v1.grpc.pb.h"
#include "support/eventually.h"
#include "support/temp_dir.h"

using namespace gvirtus;
using namespace gvirtus::device_plugin;
using gvirtus::device_plugin::test::allocatedClaim;
using gvirtus::device_plugin::test::backendSlice;
using gvirtus::device_plugin::test::FakeClaimSource;
using gvirtus::testing::eventually;
using gvirtus::testing::TempDir;
namespace drapb = k8s::io::kubelet::pkg::apis::dra::v1;
using namespace std::chrono_literals;

namespace {

std::shared_ptr<grpc::Channel> dial(const std::filesystem::path& socket) {
  return grpc::CreateChannel("unix:" + socket.string(), grpc::InsecureChannelCredentials());
}

std::unique_ptr<grpc::ClientContext> withDeadline() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + 5s);
  return context;
}

// A socket file that nothing listens on, as a crashed process leaves it.
void leaveStaleSocket(const std::filesystem::path& path) {
  std::filesystem::create_directories(path.parent_path());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string text = path.string();
  std::copy(text.begin(), text.end(), address.sun_path);
  REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0);
  ::close(fd);
}

bool isSocket(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_socket(path, ec);
}

struct Driver {
  TempDir dir{"gvirtus-dra"};
  FakeClaimSource source;
  ClaimFiles files{dir.file("state"), dir.file("cdi")};
  ClaimPreparer preparer{source, files, {}};
  DraCounters counters;
  DraServer::Config config{dir.file("registry/gpu.gvirtus.io-reg.sock"),
                           dir.file("plugin/dra.sock")};
};

}  // namespace

TEST_CASE("the kubelet's registration finds a DRA driver serving v1 at its endpoint",
          "[dra-server]") {
  Driver d;
  auto server = DraServer::start(d.config, d.preparer, d.counters);
  REQUIRE(server.has_value());
  auto registration = pluginregistration::Registration::NewStub(dial(d.config.registrationSocket));
  pluginregistration::PluginInfo info;
  REQUIRE(registration->GetInfo(withDeadline().get(), {}, &info).ok());
  CHECK(info.type() == "DRAPlugin");
  CHECK(info.name() == "gpu.gvirtus.io");
  CHECK(info.endpoint() == d.config.pluginSocket.string());
  REQUIRE(info.supported_versions_size() == 1);
  CHECK(info.supported_versions(0) == "v1.DRAPlugin");

  pluginregistration::RegistrationStatus status;
  status.set_plugin_registered(true);
  pluginregistration::RegistrationStatusResponse ignored;
  REQUIRE(registration->NotifyRegistrationStatus(withDeadline().get(), status, &ignored).ok());
  CHECK(d.counters.registered.load());
  CHECK(d.counters.registrations.load() == 1);
  status.set_plugin_registered(false);
  status.set_error("not today");
  REQUIRE(registration->NotifyRegistrationStatus(withDeadline().get(), status, &ignored).ok());
  CHECK_FALSE(d.counters.registered.load());

  CHECK((*server)->socketsIntact());
  server->reset();
  CHECK_FALSE(std::filesystem::exists(d.config.registrationSocket));
  CHECK_FALSE(std::filesystem::exists(d.config.pluginSocket));
}

TEST_CASE("NodePrepareResources answers every claim: its CDI device, or why not", "[dra-server]") {
  Driver d;
  d.source.setSlices({backendSlice("gpus/be-a", "10.0.0.7", 9999)});
  d.source.putClaim(allocatedClaim("team", "c1", "u-1", {{"gpus/be-a", "gpu-0"}}, "share-9"));
  auto server = DraServer::start(d.config, d.preparer, d.counters);
  REQUIRE(server.has_value());
  auto plugin = drapb::DRAPlugin::NewStub(dial(d.config.pluginSocket));

  drapb::NodePrepareResourcesRequest request;
  for (const auto& [name, uid] : {std::pair{"c1", "u-1"}, std::pair{"missing", "u-2"}}) {
    auto* claim = request.add_claims();
    claim->set_namespace_("team");
    claim->set_name(name);
    claim->set_uid(uid);
  }
  drapb::NodePrepareResourcesResponse response;
  REQUIRE(plugin->NodePrepareResources(withDeadline().get(), request, &response).ok());
  REQUIRE(response.claims().size() == 2);
  const auto& prepared = response.claims().at("u-1");
  CHECK(prepared.error().empty());
  REQUIRE(prepared.devices_size() == 1);
  const auto& device = prepared.devices(0);
  CHECK(device.pool_name() == "gpus/be-a");
  CHECK(device.device_name() == "gpu-0");
  REQUIRE(device.request_names_size() == 1);
  CHECK(device.request_names(0) == "gpu");
  REQUIRE(device.cdi_device_ids_size() == 1);
  CHECK(device.cdi_device_ids(0) == "gvirtus.io/claim=u-1");
  REQUIRE(device.has_share_id());
  CHECK(device.share_id() == "share-9");
  CHECK_THAT(response.claims().at("u-2").error(), Catch::Contains("not found"));
  CHECK(response.claims().at("u-2").devices_size() == 0);
  CHECK(d.files.prepared("u-1"));
  CHECK(d.counters.prepared.load() == 1);
  CHECK(d.counters.prepareErrors.load() == 1);

  drapb::NodeUnprepareResourcesRequest unprepare;
  *unprepare.add_claims() = request.claims(0);
  drapb::NodeUnprepareResourcesResponse unprepared;
  REQUIRE(plugin->NodeUnprepareResources(withDeadline().get(), unprepare, &unprepared).ok());
  REQUIRE(unprepared.claims().size() == 1);
  CHECK(unprepared.claims().at("u-1").error().empty());
  CHECK_FALSE(d.files.prepared("u-1"));
}

TEST_CASE("a call naming more claims than a node runs pods is refused unread", "[dra-server]") {
  Driver d;
  auto server = DraServer::start(d.config, d.preparer, d.counters);
  REQUIRE(server.has_value());
  drapb::NodePrepareResourcesRequest request;
  for (int i = 0; i < 1025; ++i) {
    auto* claim = request.add_claims();
    claim->set_namespace_("team");
    claim->set_name("c");
    claim->set_uid("u-" + std::to_string(i));
  }
  drapb::NodePrepareResourcesResponse response;
  auto status = drapb::DRAPlugin::NewStub(dial(d.config.pluginSocket))
                    ->NodePrepareResources(withDeadline().get(), request, &response);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(d.source.sliceLists == 0);
}

TEST_CASE("an old socket is replaced, a live one or anything else under its name is not",
          "[dra-server]") {
  Driver d;
  // A crash leaves both files, with nothing serving them: the next start serves anyway.
  for (const auto& path : {d.config.pluginSocket, d.config.registrationSocket}) {
    leaveStaleSocket(path);
    REQUIRE(isSocket(path));
  }
  {
    auto started = DraServer::start(d.config, d.preparer, d.counters);
    REQUIRE(started.has_value());
    CHECK((*started)->socketsIntact());
    // A second instance finds them served: it takes nothing from the first.
    auto second = DraServer::start(d.config, d.preparer, d.counters);
    REQUIRE_FALSE(second.has_value());
    CHECK_THAT(second.error().message, Catch::Contains("served by another process"));
    CHECK((*started)->socketsIntact());
  }
  std::filesystem::create_directories(d.config.pluginSocket.parent_path());
  std::ofstream(d.config.pluginSocket) << "not a socket";
  auto refused = DraServer::start(d.config, d.preparer, d.counters);
  REQUIRE_FALSE(refused.has_value());
  CHECK_THAT(refused.error().message, Catch::Contains("is not a socket"));
}

TEST_CASE("the driver serves again when its registration socket is deleted", "[dra-server]") {
  Driver d;
  std::jthread serving(
      [&](std::stop_token stop) { serveDra(d.config, d.preparer, d.counters, stop, 50ms); });
  REQUIRE(eventually([&] { return isSocket(d.config.registrationSocket); }));
  std::filesystem::remove(d.config.registrationSocket);
  REQUIRE(eventually([&] { return isSocket(d.config.registrationSocket); }));
  pluginregistration::PluginInfo info;
  auto registration = pluginregistration::Registration::NewStub(dial(d.config.registrationSocket));
  CHECK(registration->GetInfo(withDeadline().get(), {}, &info).ok());
  serving.request_stop();
  serving.join();
  CHECK_FALSE(std::filesystem::exists(d.config.registrationSocket));
  CHECK_FALSE(std::filesystem::exists(d.config.pluginSocket));
}
