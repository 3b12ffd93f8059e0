#include "device-plugin/plugin/server.h"

#include <catch2/catch.hpp>
#include <thread>

#include "device-plugin/dp_test_support.h"

using namespace gvirtus::device_plugin;
using namespace std::chrono_literals;
using test::callContext;
using test::pluginClient;
using test::TempDir;

namespace {

struct Served {
  TempDir dir;
  DeviceList devices{4};
  PluginCounters counters;
  std::unique_ptr<PluginServer> server;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> client;

  explicit Served(bool cdi = true) {
    auto started = PluginServer::start({dir.file("plugin.sock"), cdi}, devices, counters);
    REQUIRE(started.has_value());
    server = std::move(*started);
    client = pluginClient(dir.file("plugin.sock"));
  }

  grpc::Status allocate(const std::vector<std::vector<std::string>>& containers,
                        v1beta1::AllocateResponse& response) {
    v1beta1::AllocateRequest request;
    for (const auto& ids : containers) {
      auto* container = request.add_container_requests();
      for (const auto& id : ids) {
        container->add_devices_ids(id);
      }
    }
    return client->Allocate(callContext().get(), request, &response);
  }
};

std::vector<std::pair<std::string, std::string>> devicesOf(
    const v1beta1::ListAndWatchResponse& response) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& device : response.devices()) {
    out.emplace_back(device.id(), device.health());
  }
  return out;
}

}  // namespace

TEST_CASE("GetDevicePluginOptions offers preferred allocation only", "[device-plugin][grpc]") {
  Served served;
  v1beta1::DevicePluginOptions options;
  REQUIRE(served.client->GetDevicePluginOptions(callContext().get(), {}, &options).ok());
  CHECK_FALSE(options.pre_start_required());
  CHECK(options.get_preferred_allocation_available());
}

TEST_CASE("ListAndWatch sends the devices, then every change", "[device-plugin][grpc]") {
  Served served;
  grpc::ClientContext context;
  auto stream = served.client->ListAndWatch(&context, v1beta1::Empty{});
  v1beta1::ListAndWatchResponse response;
  REQUIRE(stream->Read(&response));
  using Devices = std::vector<std::pair<std::string, std::string>>;
  CHECK(devicesOf(response) == Devices{{"vgpu-0", "Healthy"},
                                       {"vgpu-1", "Healthy"},
                                       {"vgpu-2", "Healthy"},
                                       {"vgpu-3", "Healthy"}});
  CHECK_FALSE(response.devices(0).has_topology());

  REQUIRE(served.devices.setHealthy("vgpu-2", false).has_value());
  REQUIRE(stream->Read(&response));
  CHECK(devicesOf(response)[2] == std::pair<std::string, std::string>{"vgpu-2", "Unhealthy"});
  REQUIRE(served.devices.setHealthy("vgpu-2", true).has_value());
  REQUIRE(stream->Read(&response));
  CHECK(devicesOf(response)[2] == std::pair<std::string, std::string>{"vgpu-2", "Healthy"});
  CHECK(served.counters.listAndWatchStreams == 1);

  SECTION("stopping the server ends the stream at once") {
    const auto start = std::chrono::steady_clock::now();
    served.server.reset();
    CHECK(std::chrono::steady_clock::now() - start < 1s);
    CHECK_FALSE(stream->Read(&response));
    stream->Finish();
  }
  SECTION("the kubelet going away ends the handler") {
    context.TryCancel();
    CHECK_FALSE(stream->Read(&response));
    stream->Finish();
  }
}

TEST_CASE("Allocate answers each container with its env and CDI devices", "[device-plugin][grpc]") {
  Served served;
  v1beta1::AllocateResponse response;
  REQUIRE(served.allocate({{"vgpu-3", "vgpu-1"}, {"vgpu-0"}}, response).ok());
  REQUIRE(response.container_responses_size() == 2);
  const auto& first = response.container_responses(0);
  CHECK(first.envs().size() == 1);
  CHECK(first.envs().at("GVIRTUS_VGPU_IDS") == "vgpu-3,vgpu-1");
  REQUIRE(first.cdi_devices_size() == 2);
  CHECK(first.cdi_devices(0).name() == "gvirtus.io/vgpu=vgpu-3");
  CHECK(first.cdi_devices(1).name() == "gvirtus.io/vgpu=vgpu-1");
  CHECK(first.mounts_size() == 0);
  CHECK(first.devices_size() == 0);
  CHECK(first.annotations().empty());
  CHECK(response.container_responses(1).envs().at("GVIRTUS_VGPU_IDS") == "vgpu-0");
  CHECK(served.counters.allocations == 2);
}

TEST_CASE("Allocate without CDI names no CDI device", "[device-plugin][grpc]") {
  Served served(false);
  v1beta1::AllocateResponse response;
  REQUIRE(served.allocate({{"vgpu-0"}}, response).ok());
  CHECK(response.container_responses(0).cdi_devices_size() == 0);
  CHECK(response.container_responses(0).envs().at("GVIRTUS_VGPU_IDS") == "vgpu-0");
}

TEST_CASE("invalid Allocate requests get INVALID_ARGUMENT with the reason",
          "[device-plugin][grpc]") {
  Served served;
  v1beta1::AllocateResponse response;
  auto status = served.allocate({{"vgpu-0"}, {"vgpu-7"}}, response);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(status.error_message() == "unknown device \"vgpu-7\" (this node has vgpu-0 .. vgpu-3)");
  status = served.allocate({{"vgpu-0", "vgpu-1", "vgpu-2", "vgpu-3", "vgpu-0"}}, response);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(status.error_message() == "5 devices requested but this node has only 4");
  CHECK(served.counters.rejectedAllocations == 2);
  CHECK(served.counters.allocations == 0);
}

TEST_CASE("GetPreferredAllocation and PreStartContainer", "[device-plugin][grpc]") {
  Served served;
  v1beta1::PreferredAllocationRequest request;
  auto* container = request.add_container_requests();
  for (const char* id : {"vgpu-3", "vgpu-1", "vgpu-2"}) {
    container->add_available_deviceids(id);
  }
  container->add_must_include_deviceids("vgpu-3");
  container->set_allocation_size(2);
  v1beta1::PreferredAllocationResponse response;
  REQUIRE(served.client->GetPreferredAllocation(callContext().get(), request, &response).ok());
  REQUIRE(response.container_responses_size() == 1);
  CHECK(std::vector<std::string>(response.container_responses(0).deviceids().begin(),
                                 response.container_responses(0).deviceids().end()) ==
        std::vector<std::string>{"vgpu-3", "vgpu-1"});

  container->set_allocation_size(4);
  auto status = served.client->GetPreferredAllocation(callContext().get(), request, &response);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(status.error_message() == "allocation size 4 exceeds the 3 available devices");

  v1beta1::PreStartContainerRequest preStart;
  preStart.add_devices_ids("vgpu-0");
  v1beta1::PreStartContainerResponse preStarted;
  CHECK(served.client->PreStartContainer(callContext().get(), preStart, &preStarted).ok());
}
