// ClusterBackendSource on the real control plane: it keeps the backend list it built
// between changes, so a change that only touches a Node (its zone, the autoscaler's
// draining mark) must still reach the next admission.

#include <catch2/catch.hpp>

#include "common/time/time_text.h"

#include "webhook/cluster_fixtures.h"
#include "webhook/placement/cluster_source.h"

using namespace gvirtus::webhook;
using namespace gvirtus::webhook::testing;
using gvirtus::PatchType;
namespace resources = gvirtus::resources;

namespace {

// One backend pod on a node of its own, in a namespace of the test, and a source of it.
struct OneBackend {
  std::unique_ptr<gvirtus::KubeClient> client = gvirtus::testing::adminClient();
  TestNamespace ns;
  const std::string run = randomSuffix();
  const std::string node;
  ClusterBackendSource source;

  OneBackend(const std::string& name, const json& nodeLabels,
             gvirtus::Duration assignmentWindow = std::chrono::minutes(1))
      : ns(*client, name),
        node(name + "-gpu-" + run),
        source(*client, ns.name(), "gvirtus.io/test-run=" + run, 9999, assignmentWindow) {
    ns.waitForDefaultServiceAccount();
    json labels = nodeLabels;
    labels["gvirtus.io/backend.allowed"] = "true";
    ensureNode(*client, node, labels);
    REQUIRE(client->create(resources::kPods, ns.name(),
                           backendPod(ns.name(), "backend-" + run, node, run, 0, 16)));
    source.start();
  }
  ~OneBackend() {
    source.stop();
    (void)client->remove(resources::kNodes, "", node);
  }
  std::optional<Backend> only() {
    auto backends = *source.backends();
    return backends.size() == 1 ? std::optional(backends[0]) : std::nullopt;
  }
  // The backend, once `pods` (in the test's namespace) are given the address it has now.
  // kwok may move a new pod to another address a moment after its first (its pod-create
  // stage applied twice: seen 10.0.0.25, then 10.0.0.24, in 1 of 8 runs); a real kubelet
  // never does. The pods then follow it, as they would be given a backend's new address.
  std::optional<Backend> following(const std::vector<std::string>& pods, std::string& endpoint) {
    auto backend = only();
    if (backend && backend->endpoint() != endpoint) {
      endpoint = backend->endpoint();
      for (const auto& pod : pods) {
        const json patch = {{"metadata", {{"annotations", {{"gvirtus.io/backend", endpoint}}}}}};
        auto moved =
            client->patch(resources::kPods, ns.name(), pod, PatchType::Merge, patch.dump());
        INFO((moved ? "" : moved.error().message));
        REQUIRE(moved.has_value());
      }
    }
    return backend;
  }
};

}  // namespace

TEST_CASE("backends follow their node's zone and draining mark", "[cluster-backends]") {
  OneBackend fixture("cbs-it", {{"topology.kubernetes.io/zone", "zone-x"}});
  auto& client = fixture.client;
  const std::string& node = fixture.node;
  auto only = [&] { return fixture.only(); };
  REQUIRE(eventually([&] { return only() && only()->zone == "zone-x"; }));
  // Asked again with nothing changed: the same list, built once.
  CHECK(only()->zone == "zone-x");

  auto patchNode = [&](const json& metadata) {
    auto patched = client->patch(resources::kNodes, "", node, PatchType::Merge,
                                 json{{"metadata", metadata}}.dump());
    INFO((patched ? "" : patched.error().message));
    REQUIRE(patched.has_value());
  };
  patchNode({{"labels", {{"topology.kubernetes.io/zone", "zone-y"}}}});
  CHECK(eventually([&] { return only() && only()->zone == "zone-y"; }));
  CHECK_FALSE(only()->draining);

  patchNode({{"annotations", {{"gvirtus.io/backend.draining", "2026-11-23T00:00:00Z"}}}});
  CHECK(eventually([&] { return only() && only()->draining; }));

  // The operator takes the node's opt-in back: its backend pod is no backend from then on,
  // though the pod still runs; opted in again, it is one again.
  patchNode({{"labels", {{"gvirtus.io/backend.allowed", "false"}}}});
  CHECK(eventually([&] { return fixture.source.backends()->empty(); }));
  patchNode({{"labels", {{"gvirtus.io/backend.allowed", "true"}}}});
  CHECK(eventually([&] { return only().has_value(); }));
}

TEST_CASE("backends carry the GPU shares of the pods given them until those finish",
          "[cluster-backends]") {
  OneBackend fixture("cbs-shares-it", json::object());
  auto& client = fixture.client;
  auto& ns = fixture.ns;
  const std::string& run = fixture.run;
  auto only = [&] { return fixture.only(); };
  REQUIRE(eventually([&] { return only().has_value(); }));
  CHECK(only()->shares.empty());

  // A GVirtuS pod given that backend's GPU 0, as the webhook leaves it; gated, so that
  // neither the scheduler nor kwok touches it (the test writes its phase).
  const std::string half = "half-" + run;
  std::string endpoint = only()->endpoint();
  const json pod = {{"apiVersion", "v1"},
                    {"kind", "Pod"},
                    {"metadata",
                     {{"name", half},
                      {"namespace", ns.name()},
                      {"labels", {{"gvirtus.io/enabled", "true"}}},
                      {"annotations",
                       {{"gpu-fraction", "0.5"},
                        {"gvirtus.io/backend", endpoint},
                        {"gvirtus.io/backend-gpu", "0"}}}}},
                    {"spec",
                     {{"schedulingGates", json::array({{{"name", "gvirtus.io/test"}}})},
                      {"containers", json::array({{{"name", "app"}, {"image", "app:1"}}})}}}};
  REQUIRE(client->create(resources::kPods, ns.name(), pod));
  REQUIRE(eventually([&] {
    auto backend = fixture.following({half}, endpoint);
    return backend && backend->shares.size() == 1;
  }));
  CHECK(only()->shares[0].pod == ns.name() + "/" + half);
  CHECK(only()->shares[0].demand.gpuFraction == 0.5);

  // Finished: the share is free again.
  gvirtus::WriteOptions statusOnly;
  statusOnly.subresource = "status";
  auto done = client->patch(resources::kPods, ns.name(), half, PatchType::Merge,
                            R"({"status":{"phase":"Succeeded"}})", statusOnly);
  INFO((done ? "" : done.error().message));
  REQUIRE(done.has_value());
  CHECK(eventually([&] { return only() && only()->shares.empty(); }));
}

TEST_CASE("backends carry the pods given them within the assignment window only",
          "[cluster-backends]") {
  const auto window = std::chrono::seconds(8);
  OneBackend fixture("cbs-recent-it", json::object(), window);
  auto& client = fixture.client;
  const std::string ns = fixture.ns.name();
  auto only = [&] { return fixture.only(); };
  REQUIRE(eventually([&] { return only().has_value(); }));
  std::string endpoint = only()->endpoint();
  std::vector<std::string> created;
  auto assignedPods = [&] {
    std::vector<std::string> pods;
    if (auto backend = fixture.following(created, endpoint)) {
      for (const auto& assigned : backend->assigned) {
        pods.push_back(assigned.pod);
      }
    }
    return pods;
  };
  // A GVirtuS pod as the webhook leaves it; gated, so that nothing else touches it.
  auto given = [&](const std::string& name) {
    const json pod = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata",
         {{"name", name},
          {"namespace", ns},
          {"labels", {{"gvirtus.io/enabled", "true"}}},
          {"annotations", {{"gvirtus.io/backend", endpoint}, {"gvirtus.io/assigned-by", "a"}}}}},
        {"spec",
         {{"schedulingGates", json::array({{{"name", "gvirtus.io/test"}}})},
          {"containers", json::array({{{"name", "app"}, {"image", "app:1"}}})}}}};
    auto made = client->create(resources::kPods, ns, pod);
    REQUIRE(made.has_value());
    created.push_back(name);
    return gvirtus::parseRfc3339((*made)["metadata"]["creationTimestamp"].get<std::string>());
  };
  const auto firstCreated = given("first");
  REQUIRE(firstCreated.has_value());
  REQUIRE(eventually([&] { return assignedPods() == std::vector<std::string>{ns + "/first"}; }));

  // Once the first is older than the window, the next build leaves it out.
  REQUIRE(eventually([&] { return std::chrono::system_clock::now() - *firstCreated > window + 1s; },
                     15s));
  REQUIRE(given("second").has_value());
  REQUIRE(eventually([&] { return assignedPods() == std::vector<std::string>{ns + "/second"}; }));
  // A change to the old pod's assignment does not bring it back.
  REQUIRE(client->patch(resources::kPods, ns, "first", PatchType::Merge,
                        R"({"metadata":{"annotations":{"gvirtus.io/assigned-by":"b"}}})"));
  REQUIRE(given("third").has_value());
  REQUIRE(eventually([&] { return assignedPods().size() == 2; }));
  CHECK(assignedPods() == std::vector<std::string>{ns + "/second", ns + "/third"});
}

TEST_CASE("a backend's wired pods are its own, not an earlier backend pod's at its address",
          "[cluster-backends]") {
  OneBackend fixture("cbs-wired-it", json::object());
  auto& client = fixture.client;
  const std::string ns = fixture.ns.name();
  REQUIRE(eventually([&] { return fixture.only().has_value(); }));
  std::string endpoint = fixture.only()->endpoint();
  const std::string own = fixture.only()->podRef();
  std::vector<std::string> created;
  // A GVirtuS pod given this address and naming `backendPod` (none when empty); gated, so
  // that nothing else touches it.
  auto given = [&](const std::string& name, const std::string& backendPod) {
    json annotations = {{"gvirtus.io/backend", endpoint}};
    if (!backendPod.empty()) {
      annotations["gvirtus.io/backend-pod"] = backendPod;
    }
    const json pod = {{"apiVersion", "v1"},
                      {"kind", "Pod"},
                      {"metadata",
                       {{"name", name},
                        {"namespace", ns},
                        {"labels", {{"gvirtus.io/enabled", "true"}}},
                        {"annotations", annotations}}},
                      {"spec",
                       {{"schedulingGates", json::array({{{"name", "gvirtus.io/test"}}})},
                        {"containers", json::array({{{"name", "app"}, {"image", "app:1"}}})}}}};
    REQUIRE(client->create(resources::kPods, ns, pod).has_value());
    created.push_back(name);
  };
  auto backend = [&] { return fixture.following(created, endpoint); };
  auto wired = [&] {
    auto seen = backend();
    return seen ? seen->wired : -1;
  };
  given("own", own);
  given("unnamed", "");
  REQUIRE(eventually([&] { return wired() == 2; }));
  // A pod of an earlier backend pod that had this address, then one more of this one's: once
  // the last is among the backend's assigned pods, the cache has handled the one before it.
  given("earlier", ns + "/an-earlier-backend-pod");
  given("own-2", own);
  REQUIRE(eventually([&] {
    auto seen = backend();
    return seen && seen->assignedPod(ns + "/own-2") != nullptr;
  }));
  CHECK(wired() == 3);
}
