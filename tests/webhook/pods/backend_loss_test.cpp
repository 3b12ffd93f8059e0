// When a GVirtuS pod has lost its backend (webhook/pods/backend_loss.h): pure decisions on pods
// as the caches hold them.
#include "webhook/pods/backend_loss.h"

#include <catch2/catch.hpp>

#include "common/time/time_text.h"

using namespace gvirtus::webhook;
using nlohmann::json;
using std::chrono::seconds;

namespace {

TimePoint at(const char* text) {
  return *gvirtus::parseRfc3339(text);
}

json backend(const std::string& ip, const char* ready = "True",
             const char* since = "2026-11-26T10:00:00Z") {
  json pod = {
      {"metadata", {{"name", "be-1"}, {"namespace", "gvirtus-system"}}},
      {"status",
       {{"phase", "Running"},
        {"conditions",
         json::array({{{"type", "Ready"}, {"status", ready}, {"lastTransitionTime", since}}})}}}};
  if (!ip.empty()) {
    pod["status"]["podIP"] = ip;
  }
  return pod;
}

json frontend() {
  return {{"metadata",
           {{"name", "app"},
            {"namespace", "team-a"},
            {"labels", {{"gvirtus.io/enabled", "true"}}},
            {"annotations",
             {{"gvirtus.io/backend", "10.0.0.1:9999"},
              {"gvirtus.io/backend-pod", "gvirtus-system/be-1"}}}}},
          {"status", {{"phase", "Running"}}}};
}

const FollowedBackend kFollowed{"gvirtus-system/be-1", "10.0.0.1"};
// When the pod that follows kFollowed was created: long before any of the looks below.
const TimePoint kCreated = at("2026-11-26T09:00:00Z");

}  // namespace

TEST_CASE("a released GVirtuS pod follows the backend pod it was given", "[backend-loss]") {
  CHECK(followedBackend(frontend()) == kFollowed);

  json unlabelled = frontend();
  unlabelled["metadata"]["labels"]["gvirtus.io/enabled"] = "false";
  CHECK_FALSE(followedBackend(unlabelled));

  json waiting = frontend();
  waiting["spec"]["schedulingGates"] = json::array({{{"name", "gvirtus.io/backend"}}});
  CHECK_FALSE(followedBackend(waiting));

  json finished = frontend();
  finished["status"]["phase"] = "Succeeded";
  CHECK_FALSE(followedBackend(finished));

  json deleting = frontend();
  deleting["metadata"]["deletionTimestamp"] = "2026-11-26T10:00:00Z";
  CHECK_FALSE(followedBackend(deleting));

  // A static backend names no pod: nothing to follow.
  json statics = frontend();
  statics["metadata"]["annotations"].erase("gvirtus.io/backend-pod");
  CHECK_FALSE(followedBackend(statics));
}

TEST_CASE("a backend pod serving at the address the pod was given keeps it", "[backend-loss]") {
  const json serving = backend("10.0.0.1");
  CHECK(backendLoss(kFollowed, &serving, kCreated, at("2026-11-26T11:00:00Z"), seconds(30)).kind ==
        BackendLoss::Kind::kServing);
}

TEST_CASE("a backend pod the cache has not listed yet is not gone for a new pod",
          "[backend-loss]") {
  // Given out by the other webhook replica a moment ago: the leader's cache may lag.
  const TimePoint created = at("2026-11-26T11:00:00Z");
  const auto early =
      backendLoss(kFollowed, nullptr, created, at("2026-11-26T11:00:04Z"), seconds(30));
  CHECK(early.kind == BackendLoss::Kind::kWaiting);
  CHECK(early.recheckAt == created + kAbsentSettle);
  CHECK(backendLoss(kFollowed, nullptr, created, at("2026-11-26T11:00:10Z"), seconds(30)).kind ==
        BackendLoss::Kind::kGone);
}

TEST_CASE("a backend pod gone or at a new address is lost at once", "[backend-loss]") {
  const TimePoint now = at("2026-11-26T11:00:00Z");
  const auto gone = backendLoss(kFollowed, nullptr, kCreated, now, seconds(30));
  CHECK(gone.kind == BackendLoss::Kind::kGone);
  CHECK(gone.why == "backend pod gvirtus-system/be-1 is gone");

  const json moved = backend("10.0.0.7");
  const auto loss = backendLoss(kFollowed, &moved, kCreated, now, seconds(30));
  CHECK(loss.kind == BackendLoss::Kind::kGone);
  CHECK(loss.why.find("new address 10.0.0.7") != std::string::npos);
}

TEST_CASE("a backend pod not ready is lost only after the grace", "[backend-loss]") {
  const json restarting = backend("10.0.0.1", "False", "2026-11-26T11:00:00Z");
  const auto within =
      backendLoss(kFollowed, &restarting, kCreated, at("2026-11-26T11:00:10Z"), seconds(30));
  CHECK(within.kind == BackendLoss::Kind::kWaiting);
  CHECK(within.recheckAt == at("2026-11-26T11:00:30Z"));

  const auto past =
      backendLoss(kFollowed, &restarting, kCreated, at("2026-11-26T11:00:30Z"), seconds(30));
  CHECK(past.kind == BackendLoss::Kind::kNotReady);

  // Without an address yet (a pod created again under the name): the grace runs from its
  // Ready condition, or from its creation.
  json fresh = backend("", "False", "");
  fresh["status"].erase("conditions");
  fresh["metadata"]["creationTimestamp"] = "2026-11-26T11:00:00Z";
  CHECK(backendLoss(kFollowed, &fresh, kCreated, at("2026-11-26T11:00:05Z"), seconds(30)).kind ==
        BackendLoss::Kind::kWaiting);
  CHECK(backendLoss(kFollowed, &fresh, kCreated, at("2026-11-26T11:01:00Z"), seconds(30)).kind ==
        BackendLoss::Kind::kNotReady);
}

TEST_CASE("a draining backend pod keeps its pods until it is gone", "[backend-loss]") {
  // Deleted at 11:00 with a grace period of 5 minutes: deletionTimestamp is 11:05.
  json draining = backend("10.0.0.1", "False", "2026-11-26T11:00:00Z");
  draining["metadata"]["deletionTimestamp"] = "2026-11-26T11:05:00Z";
  const auto early =
      backendLoss(kFollowed, &draining, kCreated, at("2026-11-26T11:04:00Z"), seconds(30));
  CHECK(early.kind == BackendLoss::Kind::kWaiting);
  CHECK(early.recheckAt == at("2026-11-26T11:05:30Z"));

  // Still there well past its deadline: its node is lost, and so is the backend.
  const auto stuck =
      backendLoss(kFollowed, &draining, kCreated, at("2026-11-26T11:06:00Z"), seconds(30));
  CHECK(stuck.kind == BackendLoss::Kind::kGone);
  CHECK(stuck.why.find("stuck terminating") != std::string::npos);
}

TEST_CASE("only a controlling owner recreates a pod", "[backend-loss]") {
  json pod = frontend();
  CHECK(controllingOwner(pod).empty());
  pod["metadata"]["ownerReferences"] =
      json::array({{{"kind", "ConfigMap"}, {"name", "x"}},
                   {{"kind", "ReplicaSet"}, {"name", "web-5d8f"}, {"controller", true}}});
  CHECK(controllingOwner(pod) == "ReplicaSet web-5d8f");
  // A controller that does not replace a deleted pod: the pod counts as bare.
  pod["metadata"]["ownerReferences"] =
      json::array({{{"kind", "Workflow"}, {"name", "train"}, {"controller", true}}});
  CHECK(controllingOwner(pod).empty());
  for (const char* kind : {"StatefulSet", "Job", "DaemonSet", "ReplicationController"}) {
    pod["metadata"]["ownerReferences"][0]["kind"] = kind;
    CHECK(controllingOwner(pod) == std::string(kind) + " train");
  }
}
