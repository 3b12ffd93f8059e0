// Pods whose backend went away, from fixtures written as the webhook's backend follower
// leaves them (annotations, the condition gvirtus.io/BackendLost, Events BackendLost*).
#include "kubectl-gvirtus/lost_backends.h"

#include <catch2/catch.hpp>

#include "kubectl-gvirtus/cluster_view.h"
#include "kubectl-gvirtus/report.h"

namespace {

using namespace gvirtus::kubectl_gvirtus;
using nlohmann::json;

// 2026-11-22T10:00:00Z
const TimePoint kNow = std::chrono::system_clock::from_time_t(1795341600);

const json kBackendPods = R"([
  {"metadata": {"namespace": "gvirtus-system", "name": "backend-a"},
   "spec": {"nodeName": "gpu-1"},
   "status": {"podIP": "10.0.0.5", "conditions": [{"type": "Ready", "status": "True"}]}},
  {"metadata": {"namespace": "gvirtus-system", "name": "backend-b"},
   "spec": {"nodeName": "gpu-2"},
   "status": {"podIP": "10.0.0.6", "conditions": [
     {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-22T09:59:15Z"}]}},
  {"metadata": {"namespace": "gvirtus-system", "name": "backend-c"},
   "spec": {"nodeName": "gpu-3"},
   "status": {"podIP": "10.0.0.7", "conditions": [{"type": "Ready", "status": "True"}]}}
])"_json;

json frontend(const std::string& name, const std::string& backend, const std::string& backendPod) {
  json pod = R"({"metadata": {"namespace": "team-a", "labels": {"gvirtus.io/enabled": "true"},
                               "creationTimestamp": "2026-11-22T09:00:00Z"},
                 "spec": {"nodeName": "cpu-1"}, "status": {"phase": "Running"}})"_json;
  pod["metadata"]["name"] = name;
  pod["metadata"]["uid"] = "uid-" + name;
  pod["metadata"]["annotations"] = {{"gvirtus.io/backend", backend}};
  if (!backendPod.empty()) {
    pod["metadata"]["annotations"]["gvirtus.io/backend-pod"] = backendPod;
  }
  return pod;
}

json lostEvent(const std::string& pod, const std::string& reason, const std::string& message,
               const std::string& at) {
  return {{"metadata", {{"namespace", "team-a"}, {"name", pod + ".1"}}},
          {"involvedObject",
           {{"kind", "Pod"}, {"namespace", "team-a"}, {"name", pod}, {"uid", "uid-" + pod}}},
          {"reason", reason},
          {"message", message},
          {"type", reason == "BackendLost" ? "Warning" : "Normal"},
          {"source", {{"component", "gvirtus-webhook"}}},
          {"lastTimestamp", at}};
}

std::vector<json> backendPods() {
  return kBackendPods.get<std::vector<json>>();
}

// A bare pod whose backend pod was deleted: the webhook left a condition and a Warning.
json bareGone() {
  json pod = frontend("bare", "10.0.0.9:9999", "gvirtus-system/backend-gone");
  pod["status"]["conditions"] = R"([
    {"type": "Ready", "status": "False"},
    {"type": "gvirtus.io/BackendLost", "status": "True", "reason": "BackendGone",
     "message": "backend pod gvirtus-system/backend-gone is gone; delete this pod"}
  ])"_json;
  return pod;
}

TEST_CASE("lost backends: gone, at another IP, not Ready, and marked by the webhook", "[lost]") {
  const auto backends = backendPods();
  const auto index = indexBackendPods(backends, "gvirtus-system");
  json moved = frontend("moved", "10.0.0.3:9999", "gvirtus-system/backend-c");
  moved["metadata"]["deletionTimestamp"] = "2026-11-22T09:59:58Z";
  json marked = frontend("marked", "10.0.0.8:9999", "elsewhere/backend-x");
  marked["status"]["conditions"] = R"([{"type": "gvirtus.io/BackendLost", "status": "True",
    "reason": "BackendNotReady", "message": "not ready for 2m"}])"_json;
  json finished = frontend("finished", "10.0.0.9:9999", "gvirtus-system/backend-gone");
  finished["status"]["phase"] = "Succeeded";
  const std::vector<json> pods = {
      frontend("fine", "10.0.0.5:9999", "gvirtus-system/backend-a"),
      frontend("waits-on-b", "10.0.0.6:9999", "gvirtus-system/backend-b"),
      bareGone(),
      moved,
      frontend("short-name", "10.0.0.9:9999", "backend-gone"),  // a name in gvirtus-system
      frontend("static", "192.0.2.1:9999", ""),
      frontend("other-namespace", "10.0.0.8:9999", "elsewhere/backend-x"),
      marked,
      finished};
  const std::vector<json> events = {
      lostEvent("bare", "BackendLost",
                "Backend pod gvirtus-system/backend-gone is gone; delete this pod",
                "2026-11-22T09:59:40Z"),
      lostEvent("moved", "BackendLost", "older", "2026-11-22T09:59:00Z"),
      lostEvent("moved", "BackendLostRecreated",
                "Deleted: backend gvirtus-system/backend-c moved to 10.0.0.7; its owner "
                "recreates it",
                "2026-11-22T09:59:58Z")};

  const auto lost = lostViews(pods, index, PodEvents(events), kNow);
  REQUIRE(lost.size() == 5);
  // Gone first, by namespace and name; then not ready; then marked.
  CHECK(lost[0].name == "bare");
  CHECK(lost[0].problem == LostView::Problem::Gone);
  CHECK(lost[0].detail == "the backend pod no longer exists");
  CHECK(lost[0].condition ==
        "BackendGone: backend pod gvirtus-system/backend-gone is gone; delete this pod");
  REQUIRE(lost[0].action);
  CHECK(actionText(lost[0], kNow) ==
        "BackendLost 20s ago: Backend pod gvirtus-system/backend-gone is gone; delete this pod");
  CHECK(lost[1].name == "moved");
  CHECK(lost[1].detail == "the backend pod is at 10.0.0.7 now");
  CHECK(lost[1].deleting);
  CHECK_THAT(actionText(lost[1], kNow), Catch::StartsWith("BackendLostRecreated 2s ago: Deleted"));
  CHECK(lost[2].name == "short-name");
  CHECK(actionText(lost[2], kNow) == "nothing yet");
  CHECK(lost[3].name == "waits-on-b");
  CHECK(lost[3].problem == LostView::Problem::NotReady);
  CHECK(lost[3].detail == "the backend pod is not Ready for 45s");
  CHECK(lost[4].name == "marked");
  CHECK(lost[4].problem == LostView::Problem::Marked);
  CHECK(lost[4].detail == "marked lost by the webhook (BackendNotReady: not ready for 2m)");

  const json j = toJson(lost[1]);
  CHECK(j["problem"] == "gone");
  CHECK(j["backendPod"] == "gvirtus-system/backend-c");
  CHECK(j["deleting"] == true);
  CHECK(j["action"]["reason"] == "BackendLostRecreated");
  CHECK(toJson(lost[2])["action"] == nullptr);
}

TEST_CASE("status lists pods with a lost backend, at most a screenful", "[lost]") {
  std::vector<LostView> lost;
  for (int i = 0; i < 23; ++i) {
    LostView l;
    l.ns = "team-a";
    l.name = "app-" + std::to_string(i);
    l.backend = "10.0.0.9:9999";
    l.backendPod = "gvirtus-system/backend-gone";
    l.detail = "the backend pod no longer exists";
    lost.push_back(l);
  }
  const std::string table = lostTable(lost, kNow);
  CHECK_THAT(table, Catch::StartsWith("NAMESPACE   POD      BACKEND POD                   "
                                      "PROBLEM   WHAT IS WRONG                      DONE\n"));
  CHECK_THAT(table, Catch::Contains("team-a      app-0    gvirtus-system/backend-gone   gone      "
                                    "the backend pod no longer exists   nothing yet\n"));
  CHECK_THAT(table, Catch::Contains("app-19"));
  CHECK_THAT(table, !Catch::Contains("app-20"));
  CHECK_THAT(table, Catch::EndsWith("... and 3 more (-o json lists them all)\n"));
  CHECK(lostTable({}, kNow) == "No pod has lost its backend.\n");

  const std::string status = statusText({}, {}, lost, {}, kNow);
  CHECK_THAT(status, Catch::StartsWith("Backends: 0 ready of 0, sessions 0/0; pods waiting: 0; "
                                       "pods with a lost backend: 23\n"));
  CHECK_THAT(status, Catch::Contains("... and 3 more"));
  CHECK_THAT(statusText({}, {}, {}, {}, kNow), !Catch::Contains("No pod has lost"));
}

TEST_CASE("why: a bare pod whose backend is gone says so and what was done", "[lost]") {
  const auto backends = backendPods();
  const std::vector<json> events = {lostEvent(
      "bare", "BackendLost", "Backend pod gvirtus-system/backend-gone is gone; delete this pod",
      "2026-11-22T09:59:40Z")};
  const auto e = explainPod(bareGone(), events, backendViews(backends, {}, 9999, kNow),
                            indexBackendPods(backends, "gvirtus-system"), kNow);
  CHECK(e.state == PodExplanation::State::BackendLost);
  CHECK(stateName(e.state) == std::string("backend-lost"));
  CHECK(e.summary ==
        "lost its GVirtuS backend 10.0.0.9:9999 (backend pod gvirtus-system/backend-gone): the "
        "backend pod no longer exists; done: BackendLost 20s ago: Backend pod "
        "gvirtus-system/backend-gone is gone; delete this pod");
  const std::string text = explanationText(e, kNow);
  CHECK_THAT(text, Catch::Contains("Backend lost:   gone: the backend pod no longer exists\n"));
  CHECK_THAT(text, Catch::Contains("Condition:      gvirtus.io/BackendLost=True, BackendGone: "
                                   "backend pod gvirtus-system/backend-gone is gone; delete this "
                                   "pod\n"));
  CHECK_THAT(text, Catch::Contains("Done:           BackendLost 20s ago:"));
  const json j = toJson(e);
  CHECK(j["state"] == "backend-lost");
  CHECK(j["backendLost"]["problem"] == "gone");

  // Its backend back and Ready at the same IP, without the condition: nothing is lost.
  json back = frontend("back", "10.0.0.5:9999", "gvirtus-system/backend-a");
  const auto fine = explainPod(back, {}, backendViews(backends, {}, 9999, kNow),
                               indexBackendPods(backends, "gvirtus-system"), kNow);
  CHECK(fine.state == PodExplanation::State::Assigned);
  CHECK(fine.summary ==
        "uses the GVirtuS backend 10.0.0.5:9999 (backend pod gvirtus-system/backend-a on node "
        "gpu-1)");
}

}  // namespace
