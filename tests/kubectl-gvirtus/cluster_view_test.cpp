#include "kubectl-gvirtus/cluster_view.h"

#include <catch2/catch.hpp>

namespace {

using gvirtus::kubectl_gvirtus::BackendPods;
using gvirtus::kubectl_gvirtus::backendViews;
using gvirtus::kubectl_gvirtus::explainPod;
using gvirtus::kubectl_gvirtus::formatAge;
using gvirtus::kubectl_gvirtus::indexBackendPods;
using gvirtus::kubectl_gvirtus::PodEvents;
using gvirtus::kubectl_gvirtus::PodExplanation;
using gvirtus::kubectl_gvirtus::TimePoint;
using gvirtus::kubectl_gvirtus::waitingViews;
using nlohmann::json;

// 2026-11-22T10:00:00Z
const TimePoint kNow = std::chrono::system_clock::from_time_t(1795341600);
// No backend pods listed in gvirtus-system.
const BackendPods kNone{"gvirtus-system", {}};

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

TEST_CASE("backends: a node's mirror pod, labelled as a backend, is not listed", "[view]") {
  json mirror = backendPod("gvirtus-backend-gpu-9", "gpu-9", "10.0.0.9", true, kLoad);
  mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "abc";
  const std::vector<json> backends = {
      backendPod("gvirtus-backend-a", "gpu-1", "10.0.0.5", true, kLoad), mirror};
  auto views = backendViews(backends, {}, 9999, kNow);
  REQUIRE(views.size() == 1);
  CHECK(views[0].name == "gvirtus-backend-a");
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
  auto waiting = waitingViews(pods, PodEvents(events), {}, kNow);
  REQUIRE(waiting.size() == 2);
  CHECK(waiting[0].name == "old");
  CHECK(waiting[0].age == std::chrono::minutes(30));
  CHECK(waiting[0].reason == "none of 1 backend can take the pod: 1 at maxSessions");
  CHECK(waiting[0].reasonAge == std::chrono::minutes(20));
  CHECK(waiting[1].name == "young");
  CHECK_THAT(waiting[1].reason, Catch::Contains("no reason recorded yet"));
  CHECK_FALSE(waiting[1].reasonAge);
}

TEST_CASE("why: a pod with a backend names it, its node and its load", "[view]") {
  const std::vector<json> backendPods = {
      backendPod("gvirtus-backend-a", "gpu-1", "10.0.0.5", true, kLoad)};
  const auto backends = backendViews(backendPods, {}, 9999, kNow);
  json pod = assigned(gvirtusPod("team-a", "app", "2026-11-22T09:00:00Z"), "10.0.0.5:9999",
                      "gvirtus-system/gvirtus-backend-a");
  const std::vector<json> events = {
      event("app", "BackendAssigned", "Backend 10.0.0.5:9999", "2026-11-22T09:01:00Z"),
      event("app", "WaitingForBackend", "Waiting ...", "2026-11-22T09:00:01Z")};
  auto e = explainPod(pod, events, backends, indexBackendPods(backendPods, "gvirtus-system"), kNow);
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
  auto e = explainPod(pod, {}, {}, kNone, kNow);
  CHECK(e.state == PodExplanation::State::BackendLost);
  CHECK(e.summary ==
        "lost its GVirtuS backend 10.0.0.9:9999 (backend pod gvirtus-system/gone): the backend "
        "pod no longer exists; done: nothing yet (the webhook's leader acts once the backend is "
        "gone, or not Ready past its grace period)");
  REQUIRE(e.lost);
  json staticPod =
      assigned(gvirtusPod("team-a", "app", "2026-11-22T09:00:00Z"), "192.0.2.1:9999", "");
  auto s = explainPod(staticPod, {}, {}, kNone, kNow);
  CHECK(s.state == PodExplanation::State::Assigned);
  CHECK_THAT(s.summary, Catch::Contains("static backend"));
}

TEST_CASE("why: a waiting pod says why and for how long", "[view]") {
  json pod = gated(gvirtusPod("team-a", "app", "2026-11-22T09:50:00Z"));
  auto e = explainPod(
      pod,
      {event("app", "WaitingForBackend",
             "Waiting for a GVirtuS backend: no GVirtuS backend is ready", "2026-11-22T09:50:01Z")},
      {}, kNone, kNow);
  CHECK(e.state == PodExplanation::State::Waiting);
  CHECK(e.summary ==
        "waits for a GVirtuS backend (scheduling gate gvirtus.io/backend, 10m): no GVirtuS "
        "backend is ready (recorded 9m ago; backends now: 0 ready of 0)");
}

json readySince(json pod, const std::string& at) {
  pod["status"]["conditions"][0]["lastTransitionTime"] = at;
  return pod;
}

TEST_CASE("why: an old reason is not told as news when backends are ready now", "[view]") {
  // Seen on a cluster: why said "no GVirtuS backend is ready" while status said
  // "Backends: 2 ready of 2". The reason was recorded before the backends became Ready.
  const std::vector<json> backendPods = {
      readySince(backendPod("gvirtus-backend-a", "gpu-1", "10.0.0.5", true, ""),
                 "2026-11-22T09:55:00Z"),
      readySince(backendPod("gvirtus-backend-b", "gpu-2", "10.0.0.6", true, ""),
                 "2026-11-22T09:58:00Z")};
  const auto backends = backendViews(backendPods, {}, 9999, kNow);
  const auto index = indexBackendPods(backendPods, "gvirtus-system");
  json pod = gated(gvirtusPod("team-a", "app", "2026-11-22T09:50:00Z"));
  const json none =
      event("app", "WaitingForBackend",
            "Waiting for a GVirtuS backend: no GVirtuS backend is ready", "2026-11-22T09:50:01Z");
  auto e = explainPod(pod, {none}, backends, index, kNow);
  CHECK(e.summary ==
        "waits for a GVirtuS backend (scheduling gate gvirtus.io/backend, 10m): no GVirtuS "
        "backend is ready (recorded 9m ago, before gvirtus-backend-b became Ready 2m ago: out of "
        "date, no newer pass recorded (is a gvirtus-webhook replica leading, and do its "
        "--backend-selector and --backend-namespace match the backend pods?); backends now: 2 "
        "ready of 2)");

  // Recorded while they were Ready: the webhook does not see them.
  json late = none;
  late["lastTimestamp"] = "2026-11-22T09:59:00Z";
  CHECK_THAT(explainPod(pod, {late}, backends, index, kNow).summary,
             Catch::Contains("no GVirtuS backend is ready (recorded 60s ago while backends were "
                             "Ready: the webhook does not see them"));

  // Another reason, recorded before a backend became Ready, may still hold: its age and the
  // backends now are told next to it.
  const json full = event("app", "WaitingForBackend",
                          "Waiting for a GVirtuS backend: none of 2 backends can take the pod: 2 "
                          "at maxSessions",
                          "2026-11-22T09:56:00Z");
  CHECK_THAT(explainPod(pod, {none, full}, backends, index, kNow).summary,
             Catch::EndsWith("none of 2 backends can take the pod: 2 at maxSessions (recorded 4m "
                             "ago, before gvirtus-backend-b became Ready 2m ago; backends now: 2 "
                             "ready of 2)"));

  // The status table marks it too.
  const std::vector<json> events = {none};
  auto waiting = waitingViews({pod}, PodEvents(events), backends, kNow);
  REQUIRE(waiting.size() == 1);
  CHECK(waiting[0].reason == "no GVirtuS backend is ready (out of date: 2 ready now)");
}

TEST_CASE("why: after A, B, A the latest reason is A, even within one second", "[view]") {
  json pod = gated(gvirtusPod("team-a", "app", "2026-11-22T09:50:00Z"));
  // The recorder refreshed A's Event (a patch: a later resourceVersion) in the second it
  // wrote B's: lastTimestamp has whole seconds.
  json a =
      event("app", "WaitingForBackend", "Waiting for a GVirtuS backend: A", "2026-11-22T09:59:00Z");
  a["metadata"]["resourceVersion"] = "1205";
  a["count"] = 2;
  json b =
      event("app", "WaitingForBackend", "Waiting for a GVirtuS backend: B", "2026-11-22T09:59:00Z");
  b["metadata"]["resourceVersion"] = "1198";
  auto e = explainPod(pod, {a, b}, {}, kNone, kNow);
  CHECK_THAT(e.summary, Catch::Contains("): A (recorded 60s ago"));
  REQUIRE(e.events.size() == 2);
  CHECK(e.events[1].message == "Waiting for a GVirtuS backend: A");
  const std::vector<json> listed = {b, a};
  auto waiting = waitingViews({pod}, PodEvents(listed), {}, kNow);
  REQUIRE(waiting.size() == 1);
  CHECK(waiting[0].reason == "A");
}

TEST_CASE("why: pods without the label, or labelled but never admitted", "[view]") {
  json plain = gvirtusPod("team-a", "plain", "2026-11-22T09:00:00Z");
  plain["metadata"]["labels"] = json::object();
  CHECK(explainPod(plain, {}, {}, kNone, kNow).state == PodExplanation::State::NotGvirtus);
  json missed = gvirtusPod("team-a", "missed", "2026-11-22T09:00:00Z");
  auto e = explainPod(missed, {}, {}, kNone, kNow);
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

TEST_CASE("why: a pod that gets its GPU through a DRA claim says so", "[view]") {
  json pod = gvirtusPod("team-a", "app", "2026-11-22T09:00:00Z");
  pod["metadata"]["labels"]["gvirtus.io/dra"] = "true";
  pod["spec"]["resourceClaims"] =
      json::array({{{"name", "gvirtus-gpu"}, {"resourceClaimTemplateName", "gvirtus-gpu"}}});
  auto e = explainPod(pod, {}, {}, kNone, kNow);
  CHECK(e.state == PodExplanation::State::Claim);
  CHECK_THAT(e.summary, Catch::Contains("through a DRA claim"));
  // Without the claim it is what it was.
  pod["spec"].erase("resourceClaims");
  CHECK(explainPod(pod, {}, {}, kNone, kNow).state == PodExplanation::State::NoBackend);
}
