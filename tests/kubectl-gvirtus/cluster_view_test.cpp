#include "kubectl-gvirtus/cluster_view.h"

#include <catch2/catch.hpp>

namespace {

using gvirtus::kubectl_gvirtus::backendViews;
using gvirtus::kubectl_gvirtus::explainPod;
using gvirtus::kubectl_gvirtus::formatAge;
using gvirtus::kubectl_gvirtus::PodExplanation;
using gvirtus::kubectl_gvirtus::TimePoint;
using gvirtus::kubectl_gvirtus::waitingViews;
using nlohmann::json;

// 2026-11-22T10:00:00Z
const TimePoint kNow = std::chrono::system_clock::from_time_t(1795341600);

json backendPod(const std::string& name, const std::string& node, const std::string& ip, bool ready,
                const std::string& load) {
  json pod = {
      {"metadata", {{"namespace", "gvirtus-system"}, {"name", name}}},
      {"spec", {{"nodeName", node}}},
      {"status",
       {{"phase", "Running"},
        {"conditions", json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"}}})}}}};
  if (!ip.empty()) {
    pod["status"]["podIP"] = ip;
  }
  if (!load.empty()) {
    pod["metadata"]["annotations"] = {{"gvirtus.io/load", load}};
  }
  return pod;
}

json gvirtusPod(const std::string& ns, const std::string& name, const std::string& created) {
  return {{"metadata",
           {{"namespace", ns},
            {"name", name},
            {"uid", "uid-" + name},
            {"creationTimestamp", created},
            {"labels", {{"gvirtus.io/enabled", "true"}}}}},
          {"spec", json::object()},
          {"status", {{"phase", "Pending"}}}};
}

json gated(json pod) {
  pod["spec"]["schedulingGates"] = json::array({{{"name", "gvirtus.io/backend"}}});
  pod["metadata"]["annotations"] = {{"gvirtus.io/backend-status", "waiting"}};
  return pod;
}

json assigned(json pod, const std::string& backend, const std::string& backendPod) {
  pod["metadata"]["annotations"] = {{"gvirtus.io/backend", backend}};
  if (!backendPod.empty()) {
    pod["metadata"]["annotations"]["gvirtus.io/backend-pod"] = backendPod;
  }
  pod["spec"]["nodeName"] = "frontend-1";
  pod["status"]["phase"] = "Running";
  return pod;
}

json event(const std::string& podName, const std::string& reason, const std::string& message,
           const std::string& at) {
  return {
      {"involvedObject",
       {{"kind", "Pod"}, {"namespace", "team-a"}, {"name", podName}, {"uid", "uid-" + podName}}},
      {"reason", reason},
      {"message", message},
      {"type", "Normal"},
      {"source", {{"component", "gvirtus-webhook"}}},
      {"count", 1},
      {"lastTimestamp", at}};
}

const std::string kLoad =
    R"({"connections":3,"maxSessions":16,"gpus":[{"index":0,"memoryTotalMiB":81920,"memoryUsedMiB":1024,"utilization":12}],"updated":"2026-11-22T09:59:48Z"})";

TEST_CASE("backends: node, endpoint, readiness, load, its age and the pods given it", "[view]") {
  const std::vector<json> backends = {
      backendPod("gvirtus-backend-b", "gpu-2", "10.0.0.6", false, ""),
      backendPod("gvirtus-backend-a", "gpu-1", "10.0.0.5", true, kLoad),
      backendPod("gvirtus-backend-c", "gpu-3", "", false, "not json")};
  const std::vector<json> pods = {assigned(gvirtusPod("team-a", "app-1", "2026-11-22T09:00:00Z"),
                                           "10.0.0.5:9999", "gvirtus-system/gvirtus-backend-a"),
                                  assigned(gvirtusPod("team-a", "app-2", "2026-11-22T09:00:00Z"),
                                           "10.0.0.5:9999", "gvirtus-system/gvirtus-backend-a")};
  json done = assigned(gvirtusPod("team-a", "app-3", "2026-11-22T09:00:00Z"), "10.0.0.5:9999",
                       "gvirtus-system/gvirtus-backend-a");
  done["status"]["phase"] = "Succeeded";
  std::vector<json> all = pods;
  all.push_back(done);
  // A share of the backend's GPU 0: half of it, held while the pod runs (the finished one
  // holds nothing).
  all[0]["metadata"]["annotations"]["gpu-fraction"] = "0.5";
  all[0]["metadata"]["annotations"]["gvirtus.io/backend-gpu"] = "0";
  all[2]["metadata"]["annotations"]["gpu-fraction"] = "0.5";
  all[2]["metadata"]["annotations"]["gvirtus.io/backend-gpu"] = "0";

  auto views = backendViews(backends, all, 9999, kNow);
  REQUIRE(views.size() == 3);
  CHECK(views[0].name == "gvirtus-backend-a");  // sorted by node
  CHECK(views[0].node == "gpu-1");
  CHECK(views[0].endpoint == "10.0.0.5:9999");
  CHECK(views[0].ready);
  REQUIRE(views[0].load);
  CHECK(views[0].load->connections == 3);
  CHECK(views[0].load->gpus.size() == 1);
  CHECK(views[0].loadAge == std::chrono::seconds(12));
  CHECK(views[0].pods == 2);  // the finished pod does not count
  CHECK(views[0].heldMiB == views[0].load->gpus[0].memoryTotalMiB / 2);
  CHECK(views[1].heldMiB == 0);
  CHECK_FALSE(views[1].ready);
  CHECK_FALSE(views[1].load);
  CHECK(views[2].endpoint.empty());
  CHECK_FALSE(views[2].ready);
  CHECK_FALSE(views[2].loadError.empty());
}

TEST_CASE("waiting pods: oldest first, with the latest reason from their Events", "[view]") {
  const std::vector<json> pods = {
      gated(gvirtusPod("team-a", "young", "2026-11-22T09:58:00Z")),
      gated(gvirtusPod("team-a", "old", "2026-11-22T09:30:00Z")),
      assigned(gvirtusPod("team-a", "running", "2026-11-22T09:00:00Z"), "10.0.0.5:9999", "")};
  const std::vector<json> events = {
      event("old", "WaitingForBackend",
            "Waiting for a GVirtuS backend: no GVirtuS backend is ready", "2026-11-22T09:30:01Z"),
      event("old", "WaitingForBackend",
            "Waiting for a GVirtuS backend: none of 1 backend can take the pod: 1 at maxSessions",
            "2026-11-22T09:40:00Z"),
      event("other", "WaitingForBackend", "Waiting for a GVirtuS backend: elsewhere",
            "2026-11-22T09:50:00Z")};
  auto waiting = waitingViews(pods, events, kNow);
  REQUIRE(waiting.size() == 2);
  CHECK(waiting[0].name == "old");
  CHECK(waiting[0].age == std::chrono::minutes(30));
  CHECK(waiting[0].reason == "none of 1 backend can take the pod: 1 at maxSessions");
  CHECK(waiting[1].name == "young");
  CHECK_THAT(waiting[1].reason, Catch::Contains("no reason recorded yet"));
}

TEST_CASE("why: a pod with a backend names it, its node and its load", "[view]") {
  const auto backends = backendViews(
      {backendPod("gvirtus-backend-a", "gpu-1", "10.0.0.5", true, kLoad)}, {}, 9999, kNow);
  json pod = assigned(gvirtusPod("team-a", "app", "2026-11-22T09:00:00Z"), "10.0.0.5:9999",
                      "gvirtus-system/gvirtus-backend-a");
  const std::vector<json> events = {
      event("app", "BackendAssigned", "Backend 10.0.0.5:9999", "2026-11-22T09:01:00Z"),
      event("app", "WaitingForBackend", "Waiting ...", "2026-11-22T09:00:01Z")};
  auto e = explainPod(pod, events, backends, kNow);
  CHECK(e.state == PodExplanation::State::Assigned);
  CHECK(e.summary ==
        "uses the GVirtuS backend 10.0.0.5:9999 (backend pod gvirtus-system/gvirtus-backend-a on "
        "node gpu-1)");
  REQUIRE(e.backendView);
  REQUIRE(e.events.size() == 2);
  CHECK(e.events[0].reason == "WaitingForBackend");  // oldest first
  CHECK(e.events[1].reason == "BackendAssigned");
}

TEST_CASE("why: a backend pod that is gone, and a static backend", "[view]") {
  json pod = assigned(gvirtusPod("team-a", "app", "2026-11-22T09:00:00Z"), "10.0.0.9:9999",
                      "gvirtus-system/gone");
  auto e = explainPod(pod, {}, {}, kNow);
  CHECK(e.state == PodExplanation::State::Assigned);
  CHECK_THAT(e.summary, Catch::Contains("no longer exists"));
  json staticPod =
      assigned(gvirtusPod("team-a", "app", "2026-11-22T09:00:00Z"), "192.0.2.1:9999", "");
  CHECK_THAT(explainPod(staticPod, {}, {}, kNow).summary, Catch::Contains("static backend"));
}

TEST_CASE("why: a waiting pod says why and for how long", "[view]") {
  json pod = gated(gvirtusPod("team-a", "app", "2026-11-22T09:50:00Z"));
  auto e = explainPod(
      pod,
      {event("app", "WaitingForBackend",
             "Waiting for a GVirtuS backend: no GVirtuS backend is ready", "2026-11-22T09:50:01Z")},
      {}, kNow);
  CHECK(e.state == PodExplanation::State::Waiting);
  CHECK(e.summary ==
        "waits for a GVirtuS backend (scheduling gate gvirtus.io/backend, 10m): no GVirtuS "
        "backend is ready");
}

TEST_CASE("why: pods without the label, or labelled but never admitted", "[view]") {
  json plain = gvirtusPod("team-a", "plain", "2026-11-22T09:00:00Z");
  plain["metadata"]["labels"] = json::object();
  CHECK(explainPod(plain, {}, {}, kNow).state == PodExplanation::State::NotGvirtus);
  json missed = gvirtusPod("team-a", "missed", "2026-11-22T09:00:00Z");
  auto e = explainPod(missed, {}, {}, kNow);
  CHECK(e.state == PodExplanation::State::NoBackend);
  CHECK_THAT(e.summary, Catch::Contains("re-create it"));
}

TEST_CASE("ages print as kubectl prints them", "[view]") {
  CHECK(formatAge(std::chrono::seconds(45)) == "45s");
  CHECK(formatAge(std::chrono::seconds(119)) == "119s");
  CHECK(formatAge(std::chrono::minutes(12)) == "12m");
  CHECK(formatAge(std::chrono::hours(3)) == "3h");
  CHECK(formatAge(std::chrono::hours(72)) == "3d");
}

}  // namespace
