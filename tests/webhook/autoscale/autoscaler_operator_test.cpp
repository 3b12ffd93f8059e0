// An operator's decision stands (docs/operations.md, "Autoscaling backends"): a node the
// autoscaler opted in and an operator then opted out (the label set to false, the
// annotation gvirtus.io/autoscaled left as the autoscaler wrote it) is never opted in
// again, however long pods wait, until the operator hands it back by removing the
// annotation. The autoscaler's own opt-out removes the annotation, so its nodes come back.
#include <catch2/catch.hpp>

#include "webhook/autoscale/autoscaler.h"
#include "webhook/autoscaler_fixtures.h"

using namespace gvirtus::webhook;
using namespace gvirtus::webhook::autoscaler_testing;

namespace {

// What `kubectl label node NAME gvirtus.io/backend.allowed=false --overwrite` does.
void operatorOptsOut(FakeCluster& cluster, const std::string& name) {
  json& node = cluster.nodes.at(name);
  node["metadata"]["labels"]["gvirtus.io/backend.allowed"] = "false";
  node["metadata"]["resourceVersion"] = "50";
}

// A node the autoscaler opted in at 09:00, and whose backend has since gone with the label.
json autoscaledNode(const std::string& name) {
  return gpuNode(name, {{"gvirtus.io/backend.allowed", "true"}},
                 {{"gvirtus.io/autoscaled", "2026-11-23T09:00:00Z"}});
}

}  // namespace

TEST_CASE("a node an operator opted out is never opted in again while pods wait",
          "[autoscale][autoscaler]") {
  FakeCluster cluster;
  cluster.nodes["gpu-a"] = autoscaledNode("gpu-a");
  operatorOptsOut(cluster, "gpu-a");
  const CandidateNode candidate = candidateFromNode(cluster.nodes.at("gpu-a"));
  CHECK_FALSE(candidate.ours());
  CHECK(candidate.heldByOperator());

  BackendAutoscaler autoscaler(options(1), cluster.actions());
  const std::vector<CapacityDemand> demand = {waitingPod("p1", kStart)};
  // Due, and long after any cooldown: the operator's choice still stands.
  for (auto at : {kStart + 31s, kStart + 5min, kStart + 2h}) {
    cluster.now = at;
    autoscaler.step(cluster.list(), {}, demand);
    autoscaler.step(cluster.list(), {}, {waitingPod("late", at - 31s)});
  }
  CHECK(cluster.patches == 0);
  CHECK(cluster.label("gpu-a") == "false");
  CHECK(cluster.nodes.at("gpu-a")["metadata"]["annotations"]["gvirtus.io/autoscaled"] ==
        "2026-11-23T09:00:00Z");
  CHECK(cluster.count("BackendOptedIn") == 0);
  CHECK(autoscaler.status().held == 1);
  CHECK(autoscaler.status().autoscaled == 0);
  CHECK(autoscaler.status().wanted == 1);  // what an external autoscaler may still add

  // A new leader reads the same from the node.
  BackendAutoscaler next(options(1), cluster.actions());
  next.step(cluster.list(), {}, demand);
  CHECK(cluster.patches == 0);

  // Handed back: the operator removes the annotation, and the node is a candidate again.
  cluster.nodes.at("gpu-a")["metadata"]["annotations"].erase("gvirtus.io/autoscaled");
  next.step(cluster.list(), {}, demand);
  CHECK(cluster.label("gpu-a") == "true");
  CHECK(cluster.nodes.at("gpu-a")["metadata"]["annotations"]["gvirtus.io/autoscaled"] ==
        gvirtus::formatRfc3339(cluster.now));
  CHECK(next.status().held == 0);
}

TEST_CASE("an operator's opt-out holds against the floor, and another candidate serves",
          "[autoscale][autoscaler]") {
  FakeCluster cluster;
  cluster.nodes["gpu-a"] = autoscaledNode("gpu-a");
  cluster.nodes["gpu-b"] = gpuNode("gpu-b");
  operatorOptsOut(cluster, "gpu-a");
  // The label removed instead of set to false reads the same.
  cluster.nodes.at("gpu-a")["metadata"]["labels"].erase("gvirtus.io/backend.allowed");
  AutoscaleOptions opts = options(2);
  opts.min = 1;
  BackendAutoscaler autoscaler(opts, cluster.actions());
  // The floor passes gpu-a over (first by name) for gpu-b.
  autoscaler.step(cluster.list(), {}, {});
  CHECK(cluster.label("gpu-b") == "true");
  CHECK(autoscaler.status().optedIn == 1);
  // Demand is planned onto gpu-b, on its way; gpu-a stays as the operator left it.
  cluster.now = kStart + 1min;
  autoscaler.step(cluster.list(), {}, {waitingPod("p1", kStart), waitingPod("p2", kStart)});
  CHECK_FALSE(
      cluster.nodes.at("gpu-a")["metadata"]["labels"].contains("gvirtus.io/backend.allowed"));
  CHECK(cluster.count("BackendOptedIn") == 1);
}

TEST_CASE("the autoscaler's own opt-out leaves no mark: its node comes back for new demand",
          "[autoscale][autoscaler]") {
  FakeCluster cluster;
  cluster.nodes["gpu-a"] = gpuNode("gpu-a", {{"gvirtus.io/backend.allowed", "true"}},
                                   {{"gvirtus.io/autoscaled", "2026-11-23T09:00:00Z"},
                                    {"gvirtus.io/backend.draining", "2026-11-23T09:00:00Z"}});
  BackendAutoscaler autoscaler(options(1), cluster.actions());
  autoscaler.step(cluster.list(), {}, {});
  REQUIRE(cluster.label("gpu-a") == "false");
  CHECK_FALSE(candidateFromNode(cluster.nodes.at("gpu-a")).heldByOperator());
  CHECK(autoscaler.status().held == 0);
  cluster.now = kStart + 1min;
  autoscaler.step(cluster.list(), {}, {waitingPod("new", kStart + 10s)});
  CHECK(cluster.label("gpu-a") == "true");
}
