#include "webhook/placement/cluster_source.h"

#include <catch2/catch.hpp>

#include "common/time/time_text.h"

using namespace gvirtus::webhook;
using nlohmann::json;

namespace {

json backendPod(bool ready = true) {
  return {
      {"metadata",
       {{"name", "backend-0"},
        {"namespace", "gvirtus-system"},
        {"annotations",
         {{"gvirtus.io/load",
           R"({"connections":2,"maxSessions":8,"gpus":[{"index":0,"memoryTotalMiB":100,"memoryUsedMiB":10,"utilization":1}],"updated":"2026-11-22T10:00:00Z"})"}}}}},
      {"spec", {{"nodeName", "gpu-1"}}},
      {"status",
       {{"podIP", "10.244.1.5"},
        {"podIPs", json::array({{{"ip", "10.244.1.5"}}})},
        {"conditions", json::array({{{"type", "PodScheduled"}, {"status", "True"}},
                                    {{"type", "Ready"}, {"status", ready ? "True" : "False"}}})}}}};
}

const json kNode = {
    {"metadata",
     {{"name", "gpu-1"},
      {"labels",
       {{"topology.kubernetes.io/zone", "zone-a"}, {"gvirtus.io/backend.allowed", "true"}}}}}};

}  // namespace

TEST_CASE("a Ready backend pod with an IP is a backend", "[cluster-backends]") {
  auto backend = backendFromPod(backendPod(), &kNode, 9999);
  REQUIRE(backend.has_value());
  CHECK(backend->endpoint() == "10.244.1.5:9999");
  CHECK(backend->podRef() == "gvirtus-system/backend-0");
  CHECK(backend->node == "gpu-1");
  CHECK(backend->zone == "zone-a");
  REQUIRE(backend->load.has_value());
  CHECK(backend->load->connections == 2);
  CHECK(backend->load->maxSessions == 8);
  CHECK(backend->load->gpus.at(0).memoryFreeMiB() == 90);

  json noZone = kNode;
  noZone["metadata"]["labels"].erase("topology.kubernetes.io/zone");
  auto plain = backendFromPod(backendPod(), &noZone, 7000);
  REQUIRE(plain.has_value());
  CHECK(plain->zone.empty());
  CHECK(plain->port == 7000);
}

TEST_CASE("a backend pod is a backend only on a node an operator opted in", "[cluster-backends]") {
  // Not known yet (the node cache has not seen it): no backend until it is.
  CHECK_FALSE(backendFromPod(backendPod(), nullptr, 9999).has_value());
  json node = kNode;
  for (const char* value : {"false", "", "True"}) {
    node["metadata"]["labels"]["gvirtus.io/backend.allowed"] = value;
    CHECK_FALSE(backendFromPod(backendPod(), &node, 9999).has_value());
  }
  node["metadata"]["labels"].erase("gvirtus.io/backend.allowed");
  CHECK_FALSE(backendFromPod(backendPod(), &node, 9999).has_value());
  node["metadata"]["labels"]["gvirtus.io/backend.allowed"] = "true";
  CHECK(backendFromPod(backendPod(), &node, 9999).has_value());
}

TEST_CASE("a load report with more GPUs than the backend pod was given counts as none",
          "[cluster-backends]") {
  json pod = backendPod();
  pod["spec"]["containers"] =
      json::array({{{"name", "backend"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}});
  auto twoGpus = json::parse(pod["metadata"]["annotations"]["gvirtus.io/load"].get<std::string>());
  twoGpus["gpus"].push_back(twoGpus["gpus"][0]);
  twoGpus["gpus"][1]["index"] = 1;

  auto held = backendFromPod(pod, &kNode, 9999);
  REQUIRE(held.has_value());
  CHECK(held->load.has_value());  // one GPU reported, one given

  pod["metadata"]["annotations"]["gvirtus.io/load"] = twoGpus.dump();
  auto claimed = backendFromPod(pod, &kNode, 9999);
  REQUIRE(claimed.has_value());  // still a backend, its load unknown
  CHECK_FALSE(claimed->load.has_value());

  // A backend pod that asks for no GPU (backend.gpus=0) is bounded by its node's GPUs, when
  // the node tells them.
  pod["spec"]["containers"][0].erase("resources");
  auto unbounded = backendFromPod(pod, &kNode, 9999);
  REQUIRE(unbounded.has_value());
  REQUIRE(unbounded->load.has_value());
  CHECK(unbounded->load->gpus.size() == 2);
  json node = kNode;
  node["status"]["capacity"]["nvidia.com/gpu"] = "1";
  auto beyondNode = backendFromPod(pod, &node, 9999);
  REQUIRE(beyondNode.has_value());
  CHECK_FALSE(beyondNode->load.has_value());
  node["status"]["capacity"]["nvidia.com/gpu"] = "2";
  CHECK(backendFromPod(pod, &node, 9999)->load.has_value());
}

TEST_CASE(
    "the node cache keeps of a Node its opt-in, GPUs, and what gives a backend its zone and drain "
    "mark",
    "[cluster-backends]") {
  json node = {{"metadata",
                {{"name", "gpu-1"},
                 {"resourceVersion", "42"},
                 {"labels",
                  {{"topology.kubernetes.io/zone", "zone-a"},
                   {"gvirtus.io/backend.allowed", "true"},
                   {"kubernetes.io/os", "linux"}}},
                 {"annotations", {{"gvirtus.io/backend.draining", "true"}, {"note", "x"}}},
                 {"managedFields", json::array({{{"manager", "kubelet"}}})}}},
               {"status",
                {{"images", json::array({{{"names", {"registry/image:1"}}, {"sizeBytes", 1}}})},
                 {"capacity", {{"cpu", "64"}, {"nvidia.com/gpu", "8"}}}}}};
  const json kept = nodeFields(node);
  CHECK(
      kept ==
      json{{"metadata",
            {{"name", "gpu-1"},
             {"resourceVersion", "42"},
             {"labels",
              {{"topology.kubernetes.io/zone", "zone-a"}, {"gvirtus.io/backend.allowed", "true"}}},
             {"annotations", {{"gvirtus.io/backend.draining", "true"}}}}},
           {"status", {{"capacity", {{"nvidia.com/gpu", "8"}}}}}});
  auto full = backendFromPod(backendPod(), &node, 9999);
  auto fromKept = backendFromPod(backendPod(), &kept, 9999);
  REQUIRE(full.has_value());
  REQUIRE(fromKept.has_value());
  CHECK(fromKept->zone == full->zone);
  CHECK(fromKept->draining == full->draining);
  CHECK(fromKept->draining);
  CHECK(nodeFields(json{{"metadata", {{"name", "plain"}}}}) ==
        json{{"metadata", {{"name", "plain"}}}});
}

TEST_CASE("pods that cannot take frontends are not backends", "[cluster-backends]") {
  CHECK_FALSE(backendFromPod(backendPod(false), &kNode, 9999).has_value());
  json noIp = backendPod();
  noIp["status"].erase("podIP");
  noIp["status"].erase("podIPs");
  CHECK_FALSE(backendFromPod(noIp, &kNode, 9999).has_value());
  json deleting = backendPod();
  deleting["metadata"]["deletionTimestamp"] = "2026-11-22T10:00:00Z";
  CHECK_FALSE(backendFromPod(deleting, &kNode, 9999).has_value());
  json noConditions = backendPod();
  noConditions["status"].erase("conditions");
  CHECK_FALSE(backendFromPod(noConditions, &kNode, 9999).has_value());
}

TEST_CASE("a mirror pod, which a node's kubelet can make with any labels, is no backend",
          "[cluster-backends]") {
  json mirror = backendPod();
  mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "0123abcd";
  CHECK_FALSE(backendFromPod(mirror, &kNode, 9999).has_value());
  CHECK(backendFromPod(backendPod(), &kNode, 9999).has_value());
}

TEST_CASE("a dual-stack pod gives its IPv4 address", "[cluster-backends]") {
  json pod = backendPod();
  pod["status"]["podIP"] = "fd00::5";
  pod["status"]["podIPs"] = json::array({{{"ip", "fd00::5"}}, {{"ip", "10.244.1.6"}}});
  CHECK(backendFromPod(pod, &kNode, 9999)->ip == "10.244.1.6");
  pod["status"]["podIPs"] = json::array({{{"ip", "fd00::5"}}});
  CHECK_FALSE(backendFromPod(pod, &kNode, 9999).has_value());
}

TEST_CASE("an unreadable load report counts as unknown", "[cluster-backends]") {
  json pod = backendPod();
  pod["metadata"]["annotations"]["gvirtus.io/load"] = "{broken";
  auto backend = backendFromPod(pod, &kNode, 9999);
  REQUIRE(backend.has_value());
  CHECK_FALSE(backend->load.has_value());
}

TEST_CASE("a GVirtuS pod given a backend: when, by which webhook instance, and which pod",
          "[cluster-source]") {
  json pod = {{"metadata",
               {{"name", "app-1"},
                {"namespace", "team-a"},
                {"creationTimestamp", "2026-11-25T10:00:00Z"},
                {"annotations",
                 {{"gvirtus.io/backend", "10.244.1.5:9999"},
                  {"gvirtus.io/backend-pod", "gvirtus-system/gvirtus-backend-x7k2p"},
                  {"gvirtus.io/assigned-by", "gvirtus-webhook-0-1a2b3c4d"}}}}},
              {"status", {{"phase", "Pending"}}}};
  auto assigned = assignedPod(pod);
  REQUIRE(assigned.has_value());
  CHECK(assigned->first == "10.244.1.5:9999");
  CHECK(assigned->second.assignedBy == "gvirtus-webhook-0-1a2b3c4d");
  CHECK(gvirtus::formatRfc3339(assigned->second.created) == "2026-11-25T10:00:00Z");
  // What confirms the assignment this webhook instance made at admission.
  CHECK(assigned->second.pod == "team-a/app-1");
  // Which backend pod: another pod that later gets the same IP does not inherit it.
  CHECK(assigned->second.backendPod == "gvirtus-system/gvirtus-backend-x7k2p");

  json unclaimed = pod;
  unclaimed["metadata"]["annotations"].erase("gvirtus.io/assigned-by");
  REQUIRE(assignedPod(unclaimed).has_value());
  CHECK(assignedPod(unclaimed)->second.assignedBy.empty());
  json finished = pod;
  finished["status"]["phase"] = "Failed";
  CHECK_FALSE(assignedPod(finished).has_value());
  json waiting = pod;
  waiting["metadata"]["annotations"].erase("gvirtus.io/backend");
  CHECK_FALSE(assignedPod(waiting).has_value());
  json noTime = pod;
  noTime["metadata"].erase("creationTimestamp");
  CHECK_FALSE(assignedPod(noTime).has_value());
  // Being deleted: it will never open its session.
  json deleting = pod;
  deleting["metadata"]["deletionTimestamp"] = "2026-11-25T10:00:05Z";
  CHECK_FALSE(assignedPod(deleting).has_value());
}
