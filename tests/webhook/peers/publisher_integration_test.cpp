// The peer publisher on the real control plane: the backend source's caches, the admin
// client's merge patches, kwok giving pods their addresses. A backend pod's gvirtus.io/peers
// follows the pods assigned to it as they get an address and as they are deleted.

#include <catch2/catch.hpp>
#include <thread>

#include "webhook/cluster_fixtures.h"
#include "webhook/peers/publisher.h"
#include "webhook/placement/cluster_source.h"

using namespace gvirtus::webhook;
using namespace gvirtus::webhook::testing;
namespace resources = gvirtus::resources;

namespace {

// The annotation as the API server holds it; "(absent)" when the pod has none.
std::string peersOf(gvirtus::KubeClient& client, const std::string& ns, const std::string& pod) {
  auto got = client.get(resources::kPods, ns, pod);
  if (!got) {
    return "(error: " + got.error().message + ")";
  }
  const json& annotations = (*got)["metadata"].value("annotations", json::object());
  return annotations.contains("gvirtus.io/peers")
             ? annotations["gvirtus.io/peers"].get<std::string>()
             : "(absent)";
}

// A GVirtuS pod as the webhook leaves it when it gives it `backendPod` at `endpoint`, bound
// to `node` (kwok runs it and gives it an address).
json assignedPod(const std::string& ns, const std::string& name, const std::string& node,
                 const std::string& backendPod, const std::string& endpoint) {
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", ns},
        {"labels", {{"gvirtus.io/enabled", "true"}}},
        {"annotations",
         {{"gvirtus.io/backend", endpoint}, {"gvirtus.io/backend-pod", backendPod}}}}},
      {"spec",
       {{"nodeName", node}, {"containers", json::array({{{"name", "app"}, {"image", "app:1"}}})}}}};
}

}  // namespace

TEST_CASE("a backend pod's gvirtus.io/peers follows the pods assigned to it", "[peer-publisher]") {
  auto client = gvirtus::testing::adminClient();
  TestNamespace ns(*client, "peers-it");
  ns.waitForDefaultServiceAccount();
  const std::string run = randomSuffix();
  const std::string gpuNode = "peers-gpu-" + run;
  const std::string feNode = "peers-fe-" + run;
  ensureNode(*client, gpuNode, {{"gvirtus.io/backend.allowed", "true"}});
  ensureNode(*client, feNode, json::object());
  struct NodesRemoved {
    gvirtus::KubeClient& client;
    std::vector<std::string> names;
    ~NodesRemoved() {
      for (const auto& name : names) {
        (void)client.remove(resources::kNodes, "", name);
      }
    }
  } removeNodes{*client, {gpuNode, feNode}};

  ClusterBackendSource source(*client, ns.name(), "gvirtus.io/test-run=" + run, 9999);
  PeerPublisher publisher(source.backendPods(), source.frontendPods(), peerWriter(*client), nullptr,
                          PeerPublisherOptions{.port = 9999});
  source.start();
  std::jthread leader([&publisher](std::stop_token stop) { publisher.run(stop); });
  struct SourceStopper {
    ClusterBackendSource& source;
    std::jthread& leader;
    ~SourceStopper() {
      leader.request_stop();
      leader.join();
      source.stop();
    }
  } stopAll{source, leader};

  const std::string backend = "backend-" + run;
  const std::string backendRef = ns.name() + "/" + backend;
  REQUIRE(client->create(resources::kPods, ns.name(),
                         backendPod(ns.name(), backend, gpuNode, run, 0, 16)));
  std::string backendIp;
  REQUIRE(eventually([&] {
    backendIp = podStatus(*client, ns.name(), backend).value("podIP", "");
    return !backendIp.empty();
  }));
  // Published though empty: the shim tells "no pods yet" from "no list yet".
  REQUIRE(eventually([&] { return peersOf(*client, ns.name(), backend) == ""; }));

  // An assigned pod gets its address from kwok; the list names it within seconds.
  const std::string app = "app-" + run;
  REQUIRE(client->create(resources::kPods, ns.name(),
                         assignedPod(ns.name(), app, feNode, backendRef, backendIp + ":9999")));
  std::string appIp;
  REQUIRE(eventually([&] {
    appIp = podStatus(*client, ns.name(), app).value("podIP", "");
    return !appIp.empty();
  }));
  const auto seen = std::chrono::steady_clock::now();
  CHECK(eventually([&] { return peersOf(*client, ns.name(), backend) == appIp; },
                   std::chrono::seconds(10)));
  INFO("listed " << std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - seen)
                        .count()
                 << " ms after the address was read");

  // One that names the backend pod at an address it no longer has (a pod given an earlier
  // backend pod of that name): never listed.
  const std::string stale = "stale-" + run;
  REQUIRE(client->create(resources::kPods, ns.name(),
                         assignedPod(ns.name(), stale, feNode, backendRef, "10.255.255.1:9999")));
  REQUIRE(
      eventually([&] { return !podStatus(*client, ns.name(), stale).value("podIP", "").empty(); }));

  // Deleted: off the list as soon as it is terminating. The stale pod, which the publisher
  // read while doing this, is not on it either.
  REQUIRE(client->remove(resources::kPods, ns.name(), app));
  CHECK(eventually([&] { return peersOf(*client, ns.name(), backend) == ""; },
                   std::chrono::seconds(10)));
}
