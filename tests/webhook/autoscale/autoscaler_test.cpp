// The backend autoscaler without an API server: a fake API applies its node patches to
// copies of the nodes, and a clock the test advances stands in for time
// (autoscaler_fixtures.h). An operator's opt-out is in backend_autoscaler_operator_test.cpp,
// the autoscaler on the real control plane in backend_autoscaler_integration_test.cpp.
#include "webhook/autoscale/autoscaler.h"

#include <catch2/catch.hpp>

#include "common/base/json_patch.h"
#include "webhook/autoscaler_fixtures.h"

using namespace gvirtus::webhook;
using gvirtus::BackendRequirements;
using namespace gvirtus::webhook::autoscaler_testing;

TEST_CASE("a candidate node is read from its labels, capacity and annotations", "[autoscale]") {
  json node = gpuNode("gpu-a", {{"nvidia.com/gpu.count", "4"}, {"nvidia.com/gpu.memory", "81920"}},
                      {{"gvirtus.io/autoscaled", "2026-11-23T09:00:00Z"}});
  node["metadata"]["labels"]["gvirtus.io/backend.allowed"] = "true";
  const CandidateNode candidate = candidateFromNode(node);
  CHECK(candidate.name == "gpu-a");
  CHECK(candidate.ours());
  CHECK(candidate.gpus == 4);
  CHECK(candidate.gpuMemoryMiB == 81920);
  CHECK_FALSE(candidate.draining);
  // Opted in by hand: not ours, whatever else it says.
  const CandidateNode byHand =
      candidateFromNode(gpuNode("gpu-b", {{"gvirtus.io/backend.allowed", "true"}}));
  CHECK(byHand.optedIn);
  CHECK_FALSE(byHand.ours());
  CHECK(byHand.gpus == 1);  // from capacity nvidia.com/gpu
}

TEST_CASE("pods that waited past the threshold opt in one candidate, not before", "[autoscale]") {
  FakeCluster cluster;
  cluster.nodes["gpu-a"] = gpuNode("gpu-a");
  cluster.nodes["gpu-b"] = gpuNode("gpu-b");
  BackendAutoscaler autoscaler(options(), cluster.actions());
  const std::vector<CapacityDemand> demand = {waitingPod("p1", kStart), waitingPod("p2", kStart)};
  const std::vector<json> before = cluster.list();

  cluster.now = kStart + 10s;
  auto next = autoscaler.step(cluster.list(), {}, demand);
  CHECK(cluster.patches == 0);
  REQUIRE(next);
  CHECK(*next == 20s);  // when the pods become due
  CHECK(autoscaler.status().waiting == 2);
  CHECK(autoscaler.status().due == 0);
  CHECK(autoscaler.status().backends == 0);

  cluster.now = kStart + 30s;
  autoscaler.step(cluster.list(), {}, demand);
  CHECK(cluster.label("gpu-a") == "true");
  CHECK(cluster.annotated("gpu-a", "gvirtus.io/autoscaled"));
  CHECK(cluster.label("gpu-b") == "false");  // one backend holds both pods
  CHECK(autoscaler.status().optedIn == 1);
  CHECK(autoscaler.status().autoscaled == 1);
  CHECK(autoscaler.status().wanted == 1);
  CHECK(autoscaler.status().due == 2);
  CHECK(cluster.count("BackendOptedIn") == 1);
  CHECK(cluster.count("TriggeredScaleUp") == 2);

  // The backend is on its way: the same pods, still waiting, opt in nothing more, even
  // while the cache still shows the node as it was before the write.
  const int patches = cluster.patches;
  cluster.now = kStart + 40s;
  autoscaler.step(before, {}, demand);
  CHECK(cluster.patches == patches);
  autoscaler.step(cluster.list(), {}, demand);
  CHECK(cluster.patches == patches);
}

TEST_CASE("a new leader counts a node opted in but not yet running a backend", "[autoscale]") {
  FakeCluster cluster;
  cluster.nodes["gpu-a"] = gpuNode("gpu-a", {{"gvirtus.io/backend.allowed", "true"}},
                                   {{"gvirtus.io/autoscaled", "2026-11-23T09:59:50Z"}});
  cluster.nodes["gpu-b"] = gpuNode("gpu-b");
  // A fresh autoscaler: the previous leader's memory is gone, only the nodes remain.
  BackendAutoscaler autoscaler(options(), cluster.actions());
  cluster.now = kStart + 60s;
  autoscaler.step(cluster.list(), {}, {waitingPod("p1", kStart)});
  CHECK(cluster.patches == 0);
  CHECK(cluster.label("gpu-b") == "false");
  CHECK(autoscaler.status().wanted == 1);
}

TEST_CASE("more sessions than one backend has opt in more nodes, never beyond max", "[autoscale]") {
  FakeCluster cluster;
  for (const char* name : {"gpu-a", "gpu-b", "gpu-c"}) {
    cluster.nodes[name] = gpuNode(name);
  }
  AutoscaleOptions opts = options(2);
  opts.assumedSessions = 2;
  BackendAutoscaler autoscaler(opts, cluster.actions());
  std::vector<CapacityDemand> demand;
  for (int i = 0; i < 7; ++i) {
    demand.push_back(waitingPod("p" + std::to_string(i), kStart));
  }
  cluster.now = kStart + 31s;
  autoscaler.step(cluster.list(), {}, demand);
  CHECK(cluster.label("gpu-a") == "true");
  CHECK(cluster.label("gpu-b") == "true");
  CHECK(cluster.label("gpu-c") == "false");
  // 7 pods at 2 sessions a backend: 4 backends wanted, 2 of them beyond max.
  CHECK(autoscaler.status().wanted == 4);
}

TEST_CASE("a pod no candidate can meet opts in nothing", "[autoscale]") {
  FakeCluster cluster;
  cluster.nodes["gpu-a"] = gpuNode("gpu-a", {{"nvidia.com/gpu.memory", "16384"}});
  BackendAutoscaler autoscaler(options(), cluster.actions());
  BackendRequirements big;
  big.gpuMemoryMiB = 40000;
  BackendRequirements many;
  many.gpus = 4;
  cluster.now = kStart + 31s;
  autoscaler.step(cluster.list(), {},
                  {waitingPod("big", kStart, big), waitingPod("many", kStart, many)});
  CHECK(cluster.patches == 0);
  CHECK(autoscaler.status().wanted == 1);  // an external autoscaler may add a bigger node

  BackendRequirements fits;
  fits.gpuMemoryMiB = 8000;
  autoscaler.step(cluster.list(), {}, {waitingPod("fits", kStart, fits)});
  CHECK(cluster.label("gpu-a") == "true");
}

TEST_CASE("an idle autoscaled backend is drained, then opted out, and a busy one stays",
          "[autoscale]") {
  FakeCluster cluster;
  cluster.nodes["gpu-a"] = gpuNode("gpu-a", {{"gvirtus.io/backend.allowed", "true"}},
                                   {{"gvirtus.io/autoscaled", "2026-11-23T09:00:00Z"}});
  cluster.nodes["gpu-b"] = gpuNode("gpu-b", {{"gvirtus.io/backend.allowed", "true"}},
                                   {{"gvirtus.io/autoscaled", "2026-11-23T09:00:00Z"}});
  BackendAutoscaler autoscaler(options(), cluster.actions());
  cluster.assigned["backend-gpu-b"] = 1;  // connected to nothing yet, but given a pod
  auto backends = [&] {
    return std::vector<Backend>{backendOn("gpu-a", 0), backendOn("gpu-b", 0)};
  };

  autoscaler.step(cluster.list(), backends(), {});
  cluster.now = kStart + 9min;
  autoscaler.step(cluster.list(), backends(), {});
  CHECK_FALSE(cluster.annotated("gpu-a", "gvirtus.io/backend.draining"));

  cluster.now = kStart + 10min;
  auto next = autoscaler.step(cluster.list(), backends(), {});
  CHECK(cluster.annotated("gpu-a", "gvirtus.io/backend.draining"));
  CHECK(cluster.label("gpu-a") == "true");  // drained first, not yet opted out
  CHECK_FALSE(cluster.annotated("gpu-b", "gvirtus.io/backend.draining"));
  REQUIRE(next);
  CHECK(*next <= 15s);

  cluster.now += 15s;
  autoscaler.step(cluster.list(), backends(), {});
  CHECK(cluster.label("gpu-a") == "false");
  CHECK_FALSE(cluster.annotated("gpu-a", "gvirtus.io/autoscaled"));
  CHECK_FALSE(cluster.annotated("gpu-a", "gvirtus.io/backend.draining"));
  CHECK(cluster.label("gpu-b") == "true");
  CHECK(autoscaler.status().optedOut == 1);
  CHECK(cluster.count("BackendDraining") == 1);
  CHECK(cluster.count("BackendOptedOut") == 1);
}

TEST_CASE("a connection during the drain keeps the node until it is idle again", "[autoscale]") {
  FakeCluster cluster;
  cluster.nodes["gpu-a"] = gpuNode("gpu-a", {{"gvirtus.io/backend.allowed", "true"}},
                                   {{"gvirtus.io/autoscaled", "2026-11-23T09:00:00Z"},
                                    {"gvirtus.io/backend.draining", "2026-11-23T09:59:00Z"}});
  BackendAutoscaler autoscaler(options(), cluster.actions());
  autoscaler.step(cluster.list(), {backendOn("gpu-a", 1)}, {});
  CHECK(cluster.label("gpu-a") == "true");
  autoscaler.step(cluster.list(), {backendOn("gpu-a", 0)}, {});
  CHECK(cluster.label("gpu-a") == "false");
}

TEST_CASE("pods waiting again bring a draining backend back instead of a new node", "[autoscale]") {
  FakeCluster cluster;
  cluster.nodes["gpu-a"] = gpuNode("gpu-a", {{"gvirtus.io/backend.allowed", "true"}},
                                   {{"gvirtus.io/autoscaled", "2026-11-23T09:00:00Z"},
                                    {"gvirtus.io/backend.draining", "2026-11-23T09:59:55Z"}});
  cluster.nodes["gpu-b"] = gpuNode("gpu-b");
  BackendAutoscaler autoscaler(options(), cluster.actions());
  Backend draining = backendOn("gpu-a", 0);
  draining.draining = true;
  autoscaler.step(cluster.list(), {draining}, {waitingPod("p1", kStart - 1min)});
  CHECK_FALSE(cluster.annotated("gpu-a", "gvirtus.io/backend.draining"));
  CHECK(cluster.label("gpu-a") == "true");
  CHECK(cluster.label("gpu-b") == "false");
  CHECK(cluster.count("BackendUndrained") == 1);
}

TEST_CASE("a node opted in by hand, or edited by an operator, is never touched", "[autoscale]") {
  FakeCluster cluster;
  cluster.nodes["by-hand"] = gpuNode("by-hand", {{"gvirtus.io/backend.allowed", "true"}});
  BackendAutoscaler autoscaler(options(), cluster.actions());
  autoscaler.step(cluster.list(), {backendOn("by-hand", 0)}, {});
  cluster.now = kStart + 1h;
  autoscaler.step(cluster.list(), {backendOn("by-hand", 0)}, {});
  CHECK(cluster.patches == 0);

  // Ours, but the operator set the label back to false meanwhile: the opt-out's test
  // fails and the label stays as the operator left it.
  cluster.nodes["edited"] = gpuNode("edited", {{"gvirtus.io/backend.allowed", "true"}},
                                    {{"gvirtus.io/autoscaled", "2026-11-23T09:00:00Z"},
                                     {"gvirtus.io/backend.draining", "2026-11-23T09:00:00Z"}});
  const CandidateNode stale = candidateFromNode(cluster.nodes["edited"]);
  cluster.nodes["edited"]["metadata"]["labels"]["gvirtus.io/backend.allowed"] = "false";
  CHECK_FALSE(gvirtus::applyJsonPatch(cluster.nodes["edited"], optOutPatch(stale).toJson()));
}

TEST_CASE("node patches keep what others wrote, and refuse a node changed since it was read",
          "[autoscale]") {
  json node = gpuNode("gpu-a", {{"gvirtus.io/backend.allowed", "true"}, {"team", "ml"}},
                      {{"gvirtus.io/autoscaled", "2026-11-23T09:00:00Z"},
                       {"gvirtus.io/backend.draining", "2026-11-23T09:30:00Z"},
                       {"example.com/owner", "ops"}});
  const CandidateNode read = candidateFromNode(node);
  auto optedOut = gvirtus::applyJsonPatch(node, optOutPatch(read).toJson());
  REQUIRE(optedOut);
  CHECK((*optedOut)["metadata"]["labels"]["gvirtus.io/backend.allowed"] == "false");
  CHECK((*optedOut)["metadata"]["labels"]["team"] == "ml");
  CHECK((*optedOut)["metadata"]["annotations"] == json{{"example.com/owner", "ops"}});
  auto undrained = gvirtus::applyJsonPatch(node, undrainPatch(read).toJson());
  REQUIRE(undrained);
  CHECK((*undrained)["metadata"]["annotations"] ==
        json{{"gvirtus.io/autoscaled", "2026-11-23T09:00:00Z"}, {"example.com/owner", "ops"}});

  // Another writer added an annotation since: the whole-map write would drop it, so the
  // resourceVersion test refuses the patch.
  node["metadata"]["annotations"]["example.com/added"] = "later";
  node["metadata"]["resourceVersion"] = "2";
  CHECK_FALSE(gvirtus::applyJsonPatch(node, optOutPatch(read).toJson()));
  CHECK_FALSE(gvirtus::applyJsonPatch(node, undrainPatch(read).toJson()));
}

TEST_CASE("min keeps backends without demand, and a node opted out cools down", "[autoscale]") {
  FakeCluster cluster;
  cluster.nodes["gpu-a"] = gpuNode("gpu-a");
  AutoscaleOptions opts = options(1);
  opts.min = 1;
  BackendAutoscaler floor(opts, cluster.actions());
  floor.step(cluster.list(), {}, {});
  CHECK(cluster.label("gpu-a") == "true");
  cluster.now = kStart + 1h;
  floor.step(cluster.list(), {backendOn("gpu-a", 0)}, {});
  cluster.now = kStart + 2h;
  floor.step(cluster.list(), {backendOn("gpu-a", 0)}, {});
  CHECK_FALSE(cluster.annotated("gpu-a", "gvirtus.io/backend.draining"));

  // Without a floor: idle -> drained -> out; pods that waited since before it left do not
  // bring it back within the cooldown, a pod that started waiting after does.
  FakeCluster c2;
  c2.nodes["gpu-a"] = gpuNode("gpu-a", {{"gvirtus.io/backend.allowed", "true"}},
                              {{"gvirtus.io/autoscaled", "2026-11-23T09:00:00Z"},
                               {"gvirtus.io/backend.draining", "2026-11-23T09:00:00Z"}});
  BackendAutoscaler autoscaler(options(1), c2.actions());
  autoscaler.step(c2.list(), {}, {});
  REQUIRE(c2.label("gpu-a") == "false");
  c2.now = kStart + 1min;
  autoscaler.step(c2.list(), {}, {waitingPod("old", kStart - 1min)});
  CHECK(c2.label("gpu-a") == "false");
  c2.now = kStart + 2min;
  autoscaler.step(c2.list(), {}, {waitingPod("new", kStart + 30s)});
  CHECK(c2.label("gpu-a") == "true");
}
