// The DRA slice publisher on the real control plane, with the run's own kube-scheduler
// allocating claims from what it publishes: the backend GPUs are shared devices, the
// scheduler keeps their memory and sessions within capacity, a claim too big for every
// backend waits for a bigger one, and a draining backend is withdrawn. kwok plays the
// nodes, so the test calls the device plugin's DRA driver over its gRPC socket as the
// frontend node's kubelet would (a real kubelet does in e2e).

#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "common/base/atomic_file.h"
#include "common/base/json_access.h"
#include "common/cache/resource_cache.h"
#include "device-plugin/dra/claim_preparer.h"
#include "device-plugin/dra/server.h"
#include "dra_v1.grpc.pb.h"
#include "support/temp_dir.h"
#include "webhook/cluster_fixtures.h"
#include "webhook/dra/claim_binder.h"
#include "webhook/dra/slice.h"
#include "webhook/dra/slice_publisher.h"
#include "webhook/peers/claim_peers.h"
#include "webhook/peers/publisher.h"
#include "webhook/placement/cluster_source.h"

using namespace gvirtus::webhook;
using namespace gvirtus::webhook::testing;
using gvirtus::KubeResource;
using gvirtus::PatchType;
using gvirtus::ResourceCache;
using gvirtus::stringAt;
namespace resources = gvirtus::resources;

namespace {

const KubeResource kDeviceClasses{"resource.k8s.io", "v1", "deviceclasses", false};
const KubeResource kResourceClaims{"resource.k8s.io", "v1", "resourceclaims", true};
constexpr auto kScheduled = std::chrono::seconds(60);

// A backend pod whose one GPU has `memoryMiB` and which takes `maxSessions` sessions.
json gpuBackend(const std::string& ns, const std::string& name, const std::string& node,
                const std::string& run, int64_t memoryMiB, int maxSessions) {
  json pod = backendPod(ns, name, node, run, 0, maxSessions);
  const json load = {{"connections", 0},
                     {"maxSessions", maxSessions},
                     {"gpus", json::array({{{"index", 0},
                                            {"memoryTotalMiB", memoryMiB},
                                            {"memoryUsedMiB", 0},
                                            {"utilization", 0}}})},
                     {"updated", utcNow()}};
  pod["metadata"]["annotations"]["gvirtus.io/load"] = load.dump();
  return pod;
}

json claim(const std::string& ns, const std::string& name, const std::string& memory) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"devices",
             {{"requests",
               json::array({{{"name", "gpu"},
                             {"exactly",
                              {{"deviceClassName", kDraDriver},
                               {"capacity", {{"requests", {{"memory", memory}}}}}}}}})}}}}}};
}

// A pod on the frontend node that uses the claim of the same name.
json claimingPod(const std::string& ns, const std::string& name, const std::string& node) {
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"gvirtus.io/dra", "true"}}}}},
      {"spec",
       {{"nodeSelector", {{"kubernetes.io/hostname", node}}},
        {"resourceClaims", json::array({{{"name", "gpu"}, {"resourceClaimName", name}}})},
        {"containers",
         json::array({{{"name", "app"},
                       {"image", "app:1"},
                       {"resources", {{"claims", json::array({{{"name", "gpu"}}})}}}}})}}}};
}

gvirtus::EventRecorderOptions recorderOptions() {
  gvirtus::EventRecorderOptions options;
  options.component = "gvirtus-webhook";
  return options;
}

struct DraCluster {
  // With the claim binder: the devices name its binding conditions, and it answers them.
  explicit DraCluster(bool bindingConditions = false);
  const bool binding;
  std::unique_ptr<gvirtus::KubeClient> client = gvirtus::testing::adminClient();
  gvirtus::integration::TestNamespace ns{*client, "dra-it"};
  const std::string run = randomSuffix();
  const std::string gpuNode = "dra-gpu-" + run;
  const std::string bigGpuNode = "dra-gpu-big-" + run;
  const std::string frontendNode = "dra-fe-" + run;
  ClusterBackendSource source{*client, ns.name(), "gvirtus.io/test-run=" + run, 9999};
  ResourceCache slices{*client, kResourceSlices, "", "", sliceFieldSelector()};
  SlicePublisher publisher{source, slices, sliceApi(*client),
                           SlicePublisherOptions{.bindingConditions = binding}};
  // The claims of our driver and the pods that use claims, as the webhook keeps them with
  // --dra: the pods reserved a claim are their backend's peers.
  ResourceCache claims{
      *client, kResourceClaims, "", "", "", {.transform = compactClaim, .keep = isGvirtusClaim}};
  ResourceCache claimants{*client,   resources::kPods,
                          ns.name(), "gvirtus.io/dra=true",
                          "",        {.transform = compactClaimant, .keep = usesClaims}};
  PeerPublisher peers{source.backendPods(),
                      source.frontendPods(),
                      peerWriter(*client),
                      nullptr,
                      PeerPublisherOptions{.port = 9999},
                      ClaimantCaches{&claims, &claimants}};
  BackendChooser chooser;
  gvirtus::EventRecorder events{*client, recorderOptions()};
  std::unique_ptr<ClaimBinder> binder;
  std::jthread leader;
  std::jthread peerLeader;
  std::jthread binderLeader;

  void start() {
    ns.waitForDefaultServiceAccount();
    ensureNode(*client, gpuNode, {{"gvirtus.io/backend.allowed", "true"}});
    ensureNode(*client, bigGpuNode, {{"gvirtus.io/backend.allowed", "true"}});
    ensureNode(*client, frontendNode, {{"gvirtus.io/frontend.allowed", "true"}});
    // The class the manifests install (manifests/dra/deviceclass.yaml).
    const json deviceClass = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "DeviceClass"},
        {"metadata", {{"name", kDraDriver}}},
        {"spec",
         {{"selectors",
           json::array({{{"cel", {{"expression", "device.driver == \"gpu.gvirtus.io\""}}}}})}}}};
    if (auto made = client->create(kDeviceClasses, "", deviceClass); !made) {
      INFO(made.error().message);
      REQUIRE(made.error().isConflict());
    }
    if (binding) {
      events.start();
      binder = std::make_unique<ClaimBinder>(source, claims, chooser, bindingStatusApply(*client),
                                             ClaimBinderOptions{.events = &events});
    }
    source.setOnChange([this] {
      publisher.backendsChanged();
      if (binder) {
        binder->backendsChanged();
      }
    });
    source.start();
    slices.start();
    claims.start();
    claimants.start();
    leader = std::jthread([this](std::stop_token stop) { publisher.run(stop); });
    peerLeader = std::jthread([this](std::stop_token stop) { peers.run(stop); });
    if (binder) {
      binderLeader = std::jthread([this](std::stop_token stop) { binder->run(stop); });
    }
  }
  ~DraCluster() {
    if (binderLeader.joinable()) {
      binderLeader.request_stop();
      binderLeader.join();
    }
    events.stop();
    leader.request_stop();
    leader.join();
    peerLeader.request_stop();
    peerLeader.join();
    claims.stop();
    claimants.stop();
    slices.stop();
    source.stop();
    for (const auto& slice : slices.list()) {
      if (stringAt(*slice, {"spec", "pool", "name"}).starts_with(ns.name() + "/")) {
        (void)client->remove(kResourceSlices, "", stringAt(*slice, {"metadata", "name"}));
      }
    }
    (void)client->remove(resources::kNodes, "", gpuNode);
    (void)client->remove(resources::kNodes, "", bigGpuNode);
    (void)client->remove(resources::kNodes, "", frontendNode);
  }

  json slice(const std::string& backend) {
    auto got = client->get(kResourceSlices, "", "gvirtus-" + ns.name() + "-" + backend);
    return got ? *got : json();
  }
  // Creates the claim and a pod that uses it; the error, empty when both were created.
  // No assertion here: the burst calls it from several threads.
  std::string tryClaimAndRun(const std::string& name, const std::string& memory) {
    auto made = client->create(kResourceClaims, ns.name(), claim(ns.name(), name, memory));
    if (made) {
      made =
          client->create(resources::kPods, ns.name(), claimingPod(ns.name(), name, frontendNode));
    }
    return made ? "" : name + ": " + made.error().message;
  }
  void claimAndRun(const std::string& name, const std::string& memory) {
    const std::string error = tryClaimAndRun(name, memory);
    INFO(error);
    REQUIRE(error.empty());
  }
  bool scheduled(const std::string& pod) {
    auto got = client->get(resources::kPods, ns.name(), pod);
    return got && !stringAt(*got, {"spec", "nodeName"}).empty();
  }
  // The pod's PodScheduled condition says the scheduler tried and could not place it.
  bool unschedulable(const std::string& pod) {
    for (const auto& condition : podStatus(*client, ns.name(), pod).value("conditions", json())) {
      if (condition.value("type", "") == "PodScheduled" &&
          condition.value("reason", "") == "Unschedulable") {
        return true;
      }
    }
    return false;
  }
  // "POOL/DEVICE" the claim was given; empty while it has none.
  std::string allocated(const std::string& name) {
    auto got = client->get(kResourceClaims, ns.name(), name);
    if (!got) {
      return "";
    }
    const json* results = gvirtus::memberAt(*got, {"status", "allocation", "devices", "results"});
    if (results == nullptr || !results->is_array() || results->empty()) {
      return "";
    }
    return stringAt((*results)[0], {"pool"}) + "/" + stringAt((*results)[0], {"device"});
  }
};

DraCluster::DraCluster(bool bindingConditions) : binding(bindingConditions) {
  start();
}

// The device plugin's DRA driver on its sockets, reading through the API server.
struct FrontendDriver {
  gvirtus::testing::TempDir dir{"gvirtus-dra-it"};
  std::unique_ptr<gvirtus::device_plugin::ClaimSource> source;
  gvirtus::device_plugin::ClaimFiles files{dir.file("state"), dir.file("cdi")};
  std::unique_ptr<gvirtus::device_plugin::ClaimPreparer> preparer;
  gvirtus::device_plugin::DraCounters counters;
  std::unique_ptr<gvirtus::device_plugin::DraServer> server;
  gvirtus::device_plugin::DraServer::Config config{dir.file("reg.sock"), dir.file("dra.sock")};

  explicit FrontendDriver(gvirtus::KubeClient& client)
      : source(gvirtus::device_plugin::apiClaimSource(client)),
        preparer(std::make_unique<gvirtus::device_plugin::ClaimPreparer>(
            *source, files, std::vector<std::string>{})) {
    auto started = gvirtus::device_plugin::DraServer::start(config, *preparer, counters);
    REQUIRE(started.has_value());
    server = std::move(*started);
  }

  // NodePrepareResources for these claims (namespace, name, uid), as the kubelet sends it.
  k8s::io::kubelet::pkg::apis::dra::v1::NodePrepareResourcesResponse prepare(
      const std::vector<std::array<std::string, 3>>& claims) {
    k8s::io::kubelet::pkg::apis::dra::v1::NodePrepareResourcesRequest request;
    for (const auto& [ns, name, uid] : claims) {
      auto* claim = request.add_claims();
      claim->set_namespace_(ns);
      claim->set_name(name);
      claim->set_uid(uid);
    }
    auto stub = k8s::io::kubelet::pkg::apis::dra::v1::DRAPlugin::NewStub(grpc::CreateChannel(
        "unix:" + config.pluginSocket.string(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    k8s::io::kubelet::pkg::apis::dra::v1::NodePrepareResourcesResponse response;
    const auto status = stub->NodePrepareResources(&context, request, &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
    return response;
  }

  // "ADDRESS:PORT" the prepared claim's properties.json names.
  std::string preparedBackend(const std::string& uid) const {
    const json properties = json::parse(gvirtus::readWholeFile(files.propertiesPath(uid)));
    const json& endpoint = properties["communicator"][0]["endpoint"];
    return endpoint["server_address"].get<std::string>() + ":" +
           endpoint["port"].get<std::string>();
  }
};

}  // namespace

TEST_CASE("kube-scheduler shares a published backend GPU within its memory and sessions",
          "[dra][slice-publisher]") {
  DraCluster cluster;
  auto& client = *cluster.client;
  const std::string ns = cluster.ns.name();
  REQUIRE(client.create(resources::kPods, ns,
                        gpuBackend(ns, "be-small", cluster.gpuNode, cluster.run, 16384, 2)));
  REQUIRE(eventually([&] { return cluster.slice("be-small").is_object(); }, kScheduled));
  const json published = cluster.slice("be-small");
  INFO(published.dump());
  CHECK(stringAt(published, {"spec", "driver"}) == "gpu.gvirtus.io");
  // The API server kept the shared device: consumable capacity is on (beta from 1.36).
  CHECK(gvirtus::memberAt(published, {"spec", "devices"})
            ->at(0)
            .value("allowMultipleAllocations", false));

  // 12Gi fits the 16Gi GPU; a second 12Gi does not, 2Gi does; then both sessions are taken.
  cluster.claimAndRun("first", "12Gi");
  REQUIRE(eventually([&] { return cluster.scheduled("first"); }, kScheduled));
  CHECK(cluster.allocated("first") == ns + "/be-small/gpu-0");
  cluster.claimAndRun("too-big", "12Gi");
  cluster.claimAndRun("second", "2Gi");
  REQUIRE(eventually([&] { return cluster.scheduled("second"); }, kScheduled));
  CHECK(cluster.allocated("second") == ns + "/be-small/gpu-0");

  // The frontend node's part: the DRA driver prepares both claims with the backend GPU the
  // scheduler gave them, naming its address as the slice published it.
  const json& device = gvirtus::memberAt(published, {"spec", "devices"})->at(0);
  const std::string publishedBackend =
      stringAt(device, {"attributes", "ip", "string"}) + ":" +
      std::to_string(device["attributes"]["port"]["int"].get<int64_t>());
  FrontendDriver driver(client);
  auto uidOf = [&](const std::string& name) {
    auto got = client.get(kResourceClaims, ns, name);
    REQUIRE(got.has_value());
    return stringAt(*got, {"metadata", "uid"});
  };
  const std::string firstUid = uidOf("first");
  const std::string secondUid = uidOf("second");
  auto prepared = driver.prepare({{ns, "first", firstUid}, {ns, "second", secondUid}});
  for (const std::string& uid : {firstUid, secondUid}) {
    const auto& answer = prepared.claims().at(uid);
    INFO(answer.error());
    REQUIRE(answer.devices_size() == 1);
    CHECK(answer.devices(0).pool_name() == ns + "/be-small");
    CHECK(answer.devices(0).device_name() == "gpu-0");
    CHECK(answer.devices(0).cdi_device_ids(0) == "gvirtus.io/claim=" + uid);
    // Consumable capacity: each allocation is a share of the device.
    CHECK_FALSE(answer.devices(0).share_id().empty());
    CHECK(driver.preparedBackend(uid) == publishedBackend);
  }
  // The backend lets both pods in: the peer publisher lists their addresses, read from the
  // claims' reservations (kube-scheduler's) and the pods' status.
  auto podIp = [&](const std::string& pod) {
    return stringAt(podStatus(client, ns, pod), {"podIP"});
  };
  REQUIRE(
      eventually([&] { return !podIp("first").empty() && !podIp("second").empty(); }, kScheduled));
  auto peersOf = [&](const std::string& backend) {
    auto got = client.get(resources::kPods, ns, backend);
    return got ? stringAt(*got, {"metadata", "annotations", "gvirtus.io/peers"}) : "(gone)";
  };
  auto listed = [&] {
    std::set<std::string> addresses;
    std::stringstream value(peersOf("be-small"));
    for (std::string address; std::getline(value, address, ',');) {
      addresses.insert(address);
    }
    return addresses;
  };
  const std::set<std::string> wantedPeers = {podIp("first"), podIp("second")};
  const bool peersListed = eventually([&] { return listed() == wantedPeers; }, kScheduled);
  INFO("gvirtus.io/peers of be-small: " << peersOf("be-small"));
  CHECK(peersListed);
  // A claim deleted and made again under its name is another claim.
  auto stale = driver.prepare({{ns, "first", "0b6f2c7e-3d4a-4c1e-9f00-1234567890ab"}});
  CHECK_THAT(stale.claims().at("0b6f2c7e-3d4a-4c1e-9f00-1234567890ab").error(),
             Catch::Contains("deleted and made again"));

  cluster.claimAndRun("no-session", "1Gi");
  CHECK(eventually([&] { return cluster.unschedulable("too-big"); }, kScheduled));
  CHECK(eventually([&] { return cluster.unschedulable("no-session"); }, kScheduled));
  CHECK_FALSE(cluster.scheduled("too-big"));
  CHECK(cluster.allocated("too-big").empty());

  // A bigger backend appears: the claim that waited runs on it, not on the full one.
  REQUIRE(client.create(resources::kPods, ns,
                        gpuBackend(ns, "be-big", cluster.bigGpuNode, cluster.run, 40960, 8)));
  REQUIRE(eventually([&] { return cluster.scheduled("too-big"); }, kScheduled));
  CHECK(cluster.allocated("too-big") == ns + "/be-big/gpu-0");

  // Its node drains: its slice is withdrawn, the small one stays until its pod is gone.
  auto patched = client.patch(
      resources::kNodes, "", cluster.bigGpuNode, PatchType::Merge,
      json{{"metadata", {{"annotations", {{"gvirtus.io/backend.draining", utcNow()}}}}}}.dump());
  REQUIRE(patched.has_value());
  CHECK(eventually([&] { return cluster.slice("be-big").is_null(); }, kScheduled));
  CHECK(cluster.slice("be-small").is_object());
  REQUIRE(client.remove(resources::kPods, ns, "be-small").has_value());
  CHECK(eventually([&] { return cluster.slice("be-small").is_null(); }, kScheduled));

  // Its slice is gone, but a claim prepared before keeps working (the kubelet asks again
  // after a restart): the pod is not moved under its feet.
  auto again = driver.prepare({{ns, "first", firstUid}});
  CHECK(again.claims().at(firstUid).error().empty());
  CHECK(driver.preparedBackend(firstUid) == publishedBackend);
}

TEST_CASE("a burst of 50 claims never overbooks a device's memory or sessions",
          "[dra][slice-publisher]") {
  DraCluster cluster;
  auto& client = *cluster.client;
  const std::string ns = cluster.ns.name();
  // Room for 11 claims of 3Gi: 4 on the first (its sessions), 5 on the second (its
  // memory: 15Gi of 16Gi), 2 on the third (6Gi of 8Gi).
  const std::map<std::string, std::pair<int64_t, int>> backends = {
      {"be-a", {16384, 4}}, {"be-b", {16384, 16}}, {"be-c", {8192, 16}}};
  for (const auto& [name, size] : backends) {
    REQUIRE(
        client.create(resources::kPods, ns,
                      gpuBackend(ns, name, cluster.gpuNode, cluster.run, size.first, size.second)));
  }
  for (const auto& [name, size] : backends) {
    REQUIRE(eventually([&] { return cluster.slice(name).is_object(); }, kScheduled));
  }

  constexpr int kClaims = 50;
  std::mutex mutex;
  std::vector<std::string> errors;
  std::vector<std::jthread> creators;
  for (int w = 0; w < 5; ++w) {
    creators.emplace_back([&, w] {
      for (int i = w; i < kClaims; i += 5) {
        if (auto error = cluster.tryClaimAndRun("burst-" + std::to_string(i), "3Gi");
            !error.empty()) {
          std::lock_guard lock(mutex);
          errors.push_back(error);
        }
      }
    });
  }
  creators.clear();  // joined
  INFO(nlohmann::json(errors).dump());
  REQUIRE(errors.empty());

  auto placed = [&] {
    std::map<std::string, int> perDevice;
    for (int i = 0; i < kClaims; ++i) {
      const std::string device = cluster.allocated("burst-" + std::to_string(i));
      if (!device.empty()) {
        ++perDevice[device];
      }
    }
    return perDevice;
  };
  auto total = [](const std::map<std::string, int>& perDevice) {
    int sum = 0;
    for (const auto& [device, count] : perDevice) {
      sum += count;
    }
    return sum;
  };
  REQUIRE(eventually([&] { return total(placed()) == 11; }, std::chrono::seconds(120)));
  // The other 39 are refused by the scheduler, and every device is within its capacity.
  int refused = 0;
  REQUIRE(eventually(
      [&] {
        refused = 0;
        for (int i = 0; i < kClaims; ++i) {
          refused += cluster.unschedulable("burst-" + std::to_string(i)) ? 1 : 0;
        }
        return refused == kClaims - 11;
      },
      std::chrono::seconds(120)));
  const auto perDevice = placed();
  INFO("claims per device: " << nlohmann::json(perDevice).dump());
  CHECK(perDevice.at(ns + "/be-a/gpu-0") == 4);
  CHECK(perDevice.at(ns + "/be-b/gpu-0") == 5);
  CHECK(perDevice.at(ns + "/be-c/gpu-0") == 2);
}

TEST_CASE("kube-scheduler binds a claimant only once the claim binder finds room on its backend",
          "[dra][claim-binder]") {
  {
    auto probe = gvirtus::testing::adminClient();
    std::string whyNot;
    if (!bindingConditionsServed(*probe, whyNot)) {
      WARN("not tested: " << whyNot);
      return;
    }
  }
  DraCluster cluster(true);
  auto& client = *cluster.client;
  const std::string ns = cluster.ns.name();
  // A backend that takes one session, and reports it taken.
  json backend = gpuBackend(ns, "be-one", cluster.gpuNode, cluster.run, 16384, 1);
  json load = json::parse(stringAt(backend, {"metadata", "annotations", "gvirtus.io/load"}));
  load["connections"] = 1;
  backend["metadata"]["annotations"]["gvirtus.io/load"] = load.dump();
  REQUIRE(client.create(resources::kPods, ns, backend));
  auto conditioned = [&] {
    const json slice = cluster.slice("be-one");
    const json* devices = gvirtus::memberAt(slice, {"spec", "devices"});
    return devices != nullptr && devices->is_array() && !devices->empty() &&
           devices->at(0).contains("bindingConditions");
  };
  REQUIRE(eventually(conditioned, kScheduled));

  // kube-scheduler allocates the device (its sessions capacity is free: the session in use is
  // not a claim's), then waits for the binder, which finds the backend full.
  cluster.claimAndRun("waits", "1Gi");
  auto claimOf = [&](const std::string& name) {
    auto got = client.get(kResourceClaims, ns, name);
    return got ? *got : json();
  };
  auto pendingBinding = [&] {
    const json claim = claimOf("waits");
    const json* results = gvirtus::memberAt(claim, {"status", "allocation", "devices", "results"});
    return results != nullptr && results->is_array() && !results->empty() &&
           results->at(0).contains("bindingConditions");
  };
  REQUIRE(eventually(pendingBinding, kScheduled));
  CHECK(cluster.allocated("waits") == ns + "/be-one/gpu-0");
  // The binder answers only with room: it tells the claim it waits (its Event), kube-scheduler
  // waits for its answer (the pod's Event), and meanwhile the pod is not bound.
  auto eventOf = [&](const std::string& kind, const std::string& name, const std::string& reason) {
    gvirtus::ListOptions options;
    options.fieldSelector =
        "involvedObject.kind=" + kind + ",involvedObject.name=" + name + ",reason=" + reason;
    auto listed = client.list(resources::kEvents, ns, options);
    return listed && !listed->items.empty();
  };
  REQUIRE(eventually([&] { return eventOf("ResourceClaim", "waits", "WaitingForBackend"); },
                     kScheduled));
  REQUIRE(
      eventually([&] { return eventOf("Pod", "waits", "BindingConditionsPending"); }, kScheduled));
  CHECK_FALSE(cluster.scheduled("waits"));
  CHECK_FALSE(claimOf("waits")["status"].contains("devices"));

  // The session ends: the binder answers ready, and kube-scheduler binds the pod.
  load["connections"] = 0;
  load["updated"] = utcNow();
  REQUIRE(client.patch(
      resources::kPods, ns, "be-one", gvirtus::PatchType::Merge,
      json{{"metadata", {{"annotations", {{"gvirtus.io/load", load.dump()}}}}}}.dump()));
  REQUIRE(eventually([&] { return cluster.scheduled("waits"); }, kScheduled));
  const json answered = claimOf("waits");
  INFO(answered.dump());
  const json* entries = gvirtus::memberAt(answered, {"status", "devices"});
  REQUIRE(entries != nullptr);
  REQUIRE(entries->size() == 1);
  const json& condition = entries->at(0)["conditions"][0];
  CHECK(condition["type"] == kBackendReadyCondition);
  CHECK(condition["status"] == "True");
  CHECK(condition["reason"] == "RoomForSession");
  CHECK(entries->at(0)["shareID"] ==
        gvirtus::memberAt(answered, {"status", "allocation", "devices", "results"})
            ->at(0)["shareID"]);
}
