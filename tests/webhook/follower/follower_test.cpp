// The backend follower without an API server: its caches are FakeObjectCaches, its writes
// go to a recorder that, like the API server and the watch after it, applies them to the
// pod in the cache. On real nodes: tests/e2e/real/scenarios/74-backend-replaced.sh.
#include "webhook/follower/follower.h"

#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <thread>

#include "common/time/time_text.h"
#include "support/cluster_env.h"
#include "support/fake_object_cache.h"
#include "webhook/base/metrics.h"
#include "webhook/dra/device_taint_rule.h"

using namespace gvirtus::webhook;
using gvirtus::MetricsRegistry;
using gvirtus::Result;
using gvirtus::testing::eventually;
using gvirtus::testing::FakeObjectCache;
using gvirtus::testing::metricValue;
using nlohmann::json;

namespace {

json backendPod(const std::string& name, const std::string& ip, const char* ready = "True") {
  return {{"metadata", {{"name", name}, {"namespace", "gvirtus-system"}}},
          {"status",
           {{"phase", "Running"},
            {"podIP", ip},
            {"conditions", json::array({{{"type", "Ready"},
                                         {"status", ready},
                                         {"lastTransitionTime", "2026-11-26T11:00:00Z"}}})}}}};
}

json frontend(const std::string& name, bool owned) {
  json pod = {{"metadata",
               {{"name", name},
                {"namespace", "team-a"},
                {"uid", "uid-" + name},
                {"labels", {{"gvirtus.io/enabled", "true"}}},
                {"annotations",
                 {{"gvirtus.io/backend", "10.0.0.1:9999"},
                  {"gvirtus.io/backend-pod", "gvirtus-system/be-1"}}}}},
              {"status", {{"phase", "Running"}, {"podIP", "10.1.0.5"}}}};
  if (owned) {
    pod["metadata"]["ownerReferences"] =
        json::array({{{"kind", "ReplicaSet"}, {"name", "web-1"}, {"controller", true}}});
  }
  return pod;
}

// The API server's side: deletes mark the pod deleting (the kubelet ends it later), status
// patches merge the condition by type; both reach the cache that holds the pod (the GVirtuS
// pods', else the claimants') as the watch would bring them.
struct FakeApi {
  FakeApi(FakeObjectCache& gvirtusCache, FakeObjectCache& claimantCache)
      : gvirtusPods(gvirtusCache), claimantPods(claimantCache) {}

  FakeObjectCache& gvirtusPods;
  FakeObjectCache& claimantPods;
  std::mutex mutex;
  std::vector<std::string> deletes;  // "namespace/name uid"
  std::vector<json> statuses;
  std::map<std::string, json> rules;  // DeviceTaintRules by name
  int ruleCreates = 0;
  int failDeletes = 0;
  int failStatus = 500;
  bool echo = true;  // false: the watch is behind, the cache keeps the pod as it was

  FollowerApi api() {
    FollowerApi out;
    out.deletePod = [this](const std::string& ns, const std::string& name,
                           const std::string& uid) -> Result<void> {
      json stored;
      {
        std::lock_guard lock(mutex);
        if (failDeletes > 0) {
          --failDeletes;
          return gvirtus::fail("refused", failStatus);
        }
        FakeObjectCache& pods = holding(ns, name);
        auto pod = pods.get(ns, name);
        if (!pod) {
          return gvirtus::fail("not found", 404);
        }
        if ((*pod)["metadata"].value("uid", "") != uid) {
          return gvirtus::fail("precondition failed: UID", 409);
        }
        deletes.push_back(ns + "/" + name + " " + uid);
        if (!echo) {
          return {};
        }
        stored = *pod;
        stored["metadata"]["deletionTimestamp"] = "2026-11-26T12:00:00Z";
      }
      holding(ns, name).put(stored);
      return {};
    };
    out.patchStatus = [this](const std::string& ns, const std::string& name,
                             const std::string& text) -> Result<void> {
      json stored;
      {
        std::lock_guard lock(mutex);
        json patch = json::parse(text);
        statuses.push_back(patch);
        FakeObjectCache& pods = holding(ns, name);
        auto pod = pods.get(ns, name);
        if (!pod) {
          return gvirtus::fail("not found", 404);
        }
        if (!echo) {
          return {};
        }
        stored = *pod;
        stored["status"]["conditions"] = patch["status"]["conditions"];
      }
      holding(ns, name).put(stored);
      return {};
    };
    out.createTaintRule = [this](const json& rule) -> Result<void> {
      std::lock_guard lock(mutex);
      ++ruleCreates;
      if (!rules.emplace(rule["metadata"]["name"].get<std::string>(), rule).second) {
        return gvirtus::fail("already exists", 409);
      }
      return {};
    };
    out.deleteTaintRule = [this](const std::string& name) -> Result<void> {
      std::lock_guard lock(mutex);
      return rules.erase(name) == 1 ? Result<void>{} : gvirtus::fail("not found", 404);
    };
    out.listTaintRules = [this]() -> Result<std::vector<json>> {
      std::lock_guard lock(mutex);
      std::vector<json> all;
      for (const auto& [name, rule] : rules) {
        all.push_back(rule);
      }
      return all;
    };
    return out;
  }
  size_t ruleCount() {
    std::lock_guard lock(mutex);
    return rules.size();
  }
  FakeObjectCache& holding(const std::string& ns, const std::string& name) {
    return gvirtusPods.get(ns, name) ? gvirtusPods : claimantPods;
  }
  size_t deleteCount() {
    std::lock_guard lock(mutex);
    return deletes.size();
  }
  size_t statusCount() {
    std::lock_guard lock(mutex);
    return statuses.size();
  }
};

std::string condition(const FakeObjectCache& pods, const std::string& name) {
  auto pod = pods.get("team-a", name);
  return pod ? backendLostCondition(*pod) : "(no pod)";
}

struct Fixture {
  // With device taints (Kubernetes 1.37): claimants are left to kube-controller-manager.
  explicit Fixture(bool withTaints = false) : taints(withTaints) {
    for (FakeObjectCache* cache : {&backends, &frontends, &claims, &claimants}) {
      cache->start();
    }
  }

  bool taints;
  FakeObjectCache backends, frontends, claims, claimants;
  FakeApi api{frontends, claimants};
  MetricsRegistry registry;
  WebhookMetrics metrics{registry};
  TimePoint now = *gvirtus::parseRfc3339("2026-11-26T11:00:10Z");
  BackendFollower follower{backends,
                           frontends,
                           api.api(),
                           nullptr,
                           &metrics,
                           BackendFollowerOptions{.grace = std::chrono::seconds(30),
                                                  .backoffInitial = std::chrono::milliseconds(20),
                                                  .backoffMax = std::chrono::milliseconds(100),
                                                  .now = [this] { return now; },
                                                  .taintLostDevices = taints},
                           ClaimantCaches{&claims, &claimants}};
};

}  // namespace

TEST_CASE("a pod with an owner whose backend pod is gone is deleted for its owner",
          "[backend-follower]") {
  Fixture f;
  f.frontends.put(frontend("web-a", true));
  f.backends.put(backendPod("be-1", "10.0.0.1"));
  REQUIRE(f.follower.sync("team-a/web-a"));
  CHECK(f.api.deleteCount() == 0);  // serving: left alone

  f.backends.remove("gvirtus-system", "be-1");
  REQUIRE(f.follower.sync("team-a/web-a"));
  REQUIRE(f.api.deleteCount() == 1);
  CHECK(f.api.deletes[0] == "team-a/web-a uid-web-a");  // only that pod, by its UID
  CHECK(f.api.statusCount() == 0);
  CHECK(metricValue(f.registry.render(),
                    R"(gvirtus_webhook_backend_lost_pods_total{action="recreated"})") == 1);

  // Being deleted now: nothing more, however often asked.
  REQUIRE(f.follower.sync("team-a/web-a"));
  CHECK(f.api.deleteCount() == 1);
}

TEST_CASE("a pod replaced under its name meanwhile is not deleted", "[backend-follower]") {
  Fixture f;
  f.frontends.put(frontend("db-0", true));
  // The cache still holds the old pod; the API server has a new one under the name, so the
  // DELETE's UID precondition fails (409).
  f.api.failDeletes = 1;
  f.api.failStatus = 409;
  auto synced = f.follower.sync("team-a/db-0");
  CHECK(synced);
  CHECK(f.api.deleteCount() == 0);
  // A refused delete of another kind comes back as an error, to be retried.
  f.frontends.put(frontend("db-1", true));
  f.api.failDeletes = 1;
  f.api.failStatus = 500;
  CHECK_FALSE(f.follower.sync("team-a/db-1"));
  REQUIRE(f.follower.sync("team-a/db-1"));
  CHECK(f.api.deleteCount() == 1);
  CHECK(metricValue(f.registry.render(),
                    R"(gvirtus_webhook_backend_lost_pods_total{action="failed"})") == 1);
}

TEST_CASE("a bare pod whose backend went away is marked once, never deleted",
          "[backend-follower]") {
  Fixture f;
  f.frontends.put(frontend("lonely", false));
  f.backends.put(backendPod("be-1", "10.0.0.9"));  // a new address
  REQUIRE(f.follower.sync("team-a/lonely"));
  CHECK(f.api.deleteCount() == 0);
  REQUIRE(f.api.statusCount() == 1);
  const json& set = f.api.statuses[0]["status"]["conditions"][0];
  CHECK(set["type"] == "gvirtus.io/BackendLost");
  CHECK(set["status"] == "True");
  CHECK(set["reason"] == "BackendGone");
  CHECK(set["message"].get<std::string>().find("new address 10.0.0.9") != std::string::npos);
  CHECK(condition(f.frontends, "lonely") == "True");

  // Marked: not again.
  REQUIRE(f.follower.sync("team-a/lonely"));
  CHECK(f.api.statusCount() == 1);
  CHECK(metricValue(f.registry.render(),
                    R"(gvirtus_webhook_backend_lost_pods_total{action="marked"})") == 1);
}

TEST_CASE("a backend back at the same address within the grace keeps its pods",
          "[backend-follower]") {
  Fixture f;
  f.frontends.put(frontend("web-a", true));
  f.frontends.put(frontend("lonely", false));
  f.backends.put(backendPod("be-1", "10.0.0.1", "False"));  // not ready since 11:00:00

  // 10 s into the 30 s grace: nothing done, a look again when it runs out.
  auto synced = f.follower.sync("team-a/web-a");
  REQUIRE(synced);
  REQUIRE(synced->requeueAfter);
  CHECK(*synced->requeueAfter == std::chrono::seconds(20));
  CHECK(f.api.deleteCount() == 0);

  // Ready again: nothing moved.
  f.backends.put(backendPod("be-1", "10.0.0.1", "True"));
  f.now += std::chrono::seconds(60);
  REQUIRE(f.follower.sync("team-a/web-a"));
  REQUIRE(f.follower.sync("team-a/lonely"));
  CHECK(f.api.deleteCount() == 0);
  CHECK(f.api.statusCount() == 0);

  // Not ready past the grace: moved; the bare pod marked, and unmarked when it serves again.
  f.backends.put(backendPod("be-1", "10.0.0.1", "False"));
  REQUIRE(f.follower.sync("team-a/web-a"));
  REQUIRE(f.follower.sync("team-a/lonely"));
  CHECK(f.api.deleteCount() == 1);
  CHECK(condition(f.frontends, "lonely") == "True");
  CHECK(f.api.statuses.back()["status"]["conditions"][0]["reason"] == "BackendNotReady");
  f.backends.put(backendPod("be-1", "10.0.0.1", "True"));
  REQUIRE(f.follower.sync("team-a/lonely"));
  CHECK(condition(f.frontends, "lonely") == "False");
}

TEST_CASE("the leader acts when the backend pod goes, without being asked", "[backend-follower]") {
  Fixture f;
  f.backends.put(backendPod("be-1", "10.0.0.1"));
  for (const char* name : {"web-a", "web-b", "web-c"}) {
    f.frontends.put(frontend(name, true));
  }
  f.frontends.put(frontend("lonely", false));
  std::jthread leader([&f](std::stop_token stop) { f.follower.run(stop); });
  f.backends.remove("gvirtus-system", "be-1");
  REQUIRE(eventually([&] { return f.api.deleteCount() == 3; }));
  REQUIRE(eventually([&] { return condition(f.frontends, "lonely") == "True"; }));
  CHECK(f.api.deleteCount() == 3);
}

TEST_CASE("a pod acted on is not acted on again before the watch brings the change",
          "[backend-follower]") {
  Fixture f;
  f.api.echo = false;
  f.frontends.put(frontend("web-a", true));
  f.frontends.put(frontend("lonely", false));
  for (int i = 0; i < 3; ++i) {
    REQUIRE(f.follower.sync("team-a/web-a"));
    REQUIRE(f.follower.sync("team-a/lonely"));
  }
  CHECK(f.api.deleteCount() == 1);
  CHECK(f.api.statusCount() == 1);
  CHECK(metricValue(f.registry.render(),
                    R"(gvirtus_webhook_backend_lost_pods_total{action="recreated"})") == 1);
}

TEST_CASE("a pod naming a backend pod outside the backend namespace is left alone",
          "[backend-follower]") {
  Fixture f;
  json elsewhere = frontend("web-a", true);
  elsewhere["metadata"]["annotations"]["gvirtus.io/backend-pod"] = "old-gvirtus/be-1";
  f.frontends.put(elsewhere);
  REQUIRE(f.follower.sync("team-a/web-a"));
  CHECK(f.api.deleteCount() == 0);
}

TEST_CASE("most backend pods not ready at once move no pod, but a backend pod gone still does",
          "[backend-follower]") {
  Fixture f;
  f.frontends.put(frontend("web-a", true));
  // Twelve backend pods not ready since 11:00:00 (node heartbeats lost, say), well past the
  // grace: the follower holds, and looks again a grace later.
  for (int i = 1; i <= 12; ++i) {
    f.backends.put(backendPod("be-" + std::to_string(i), "10.0.0." + std::to_string(i), "False"));
  }
  f.now += std::chrono::seconds(60);
  auto synced = f.follower.sync("team-a/web-a");
  REQUIRE(synced);
  REQUIRE(synced->requeueAfter);
  CHECK(*synced->requeueAfter == std::chrono::seconds(30));
  CHECK(f.api.deleteCount() == 0);

  // Six ready again: half of them are not, no longer most; be-1 is still not ready.
  for (int i = 7; i <= 12; ++i) {
    f.backends.put(backendPod("be-" + std::to_string(i), "10.0.0." + std::to_string(i), "True"));
  }
  REQUIRE(f.follower.sync("team-a/web-a"));
  CHECK(f.api.deleteCount() == 1);

  // Most not ready again, and a pod whose backend pod is gone: moved all the same.
  for (int i = 7; i <= 12; ++i) {
    f.backends.put(backendPod("be-" + std::to_string(i), "10.0.0." + std::to_string(i), "False"));
  }
  json other = frontend("web-b", true);
  other["metadata"]["annotations"]["gvirtus.io/backend-pod"] = "gvirtus-system/be-gone";
  f.frontends.put(other);
  REQUIRE(f.follower.sync("team-a/web-b"));
  CHECK(f.api.deleteCount() == 2);
}

// --dra: pods that hold a claim follow the backend pods their claims were allocated from.
namespace {

// A claim of team-a allocated gpu-0 of `backendPod`'s pool, reserved for `pods` (by name,
// their UIDs "uid-NAME"), as compactClaim() keeps it.
json allocatedClaim(const std::string& name, const std::string& backendPod,
                    const std::vector<std::string>& pods) {
  json reservedFor = json::array();
  for (const auto& pod : pods) {
    reservedFor.push_back({{"resource", "pods"}, {"name", pod}, {"uid", "uid-" + pod}});
  }
  return compactClaim(
      {{"metadata", {{"name", name}, {"namespace", "team-a"}, {"uid", "claim-" + name}}},
       {"status",
        {{"allocation",
          {{"devices",
            {{"results", json::array({{{"driver", "gpu.gvirtus.io"},
                                       {"request", "gpu"},
                                       {"pool", backendPod},
                                       {"device", "gpu-0"}}})}}}}},
         {"reservedFor", std::move(reservedFor)}}}});
}

// A pod labelled gvirtus.io/dra that names `claim` (made for it from a template), as
// compactClaimant() keeps it.
json claimant(const std::string& name, const std::string& claim, bool owned) {
  json pod = {{"metadata",
               {{"name", name},
                {"namespace", "team-a"},
                {"uid", "uid-" + name},
                {"creationTimestamp", "2026-11-26T10:00:00Z"},
                {"labels", {{"gvirtus.io/dra", "true"}}}}},
              {"spec", {{"resourceClaims", json::array({{{"name", "gpu"}}})}}},
              {"status",
               {{"phase", "Running"},
                {"podIP", "10.1.0.7"},
                {"resourceClaimStatuses",
                 json::array({{{"name", "gpu"}, {"resourceClaimName", claim}}})}}}};
  if (owned) {
    pod["metadata"]["ownerReferences"] = json::array(
        {{{"kind", "ReplicaSet"}, {"name", "infer-1"}, {"controller", true}, {"uid", "rs"}}});
  }
  return compactClaimant(pod);
}

}  // namespace

TEST_CASE("a claimant whose claim's backend pod is gone is deleted for its owner",
          "[backend-follower][dra]") {
  Fixture f;
  f.backends.put(backendPod("be-1", "10.0.0.1"));
  f.claims.put(allocatedClaim("infer-a-gpu", "gvirtus-system/be-1", {"infer-a"}));
  f.claimants.put(claimant("infer-a", "infer-a-gpu", true));
  REQUIRE(f.follower.sync("claimant:team-a/infer-a"));
  CHECK(f.api.deleteCount() == 0);  // serving: left alone

  f.backends.remove("gvirtus-system", "be-1");
  REQUIRE(f.follower.sync("claimant:team-a/infer-a"));
  REQUIRE(f.api.deleteCount() == 1);
  CHECK(f.api.deletes[0] == "team-a/infer-a uid-infer-a");
  CHECK(metricValue(f.registry.render(),
                    R"(gvirtus_webhook_backend_lost_pods_total{action="recreated"})") == 1);
  REQUIRE(f.follower.sync("claimant:team-a/infer-a"));  // being deleted now
  CHECK(f.api.deleteCount() == 1);
}

TEST_CASE("only the pod the scheduler reserved the claim for, using it itself, follows it",
          "[backend-follower][dra]") {
  Fixture f;  // no backend pod: be-1 is gone
  f.claims.put(allocatedClaim("shared", "gvirtus-system/be-1", {"reserved"}));
  // Names the claim but is not reserved: kube-scheduler never let it use the device.
  f.claimants.put(claimant("unreserved", "shared", true));
  // Reserved by name, but another pod now (a new UID under the name).
  json again = claimant("reserved", "shared", true);
  again["metadata"]["uid"] = "uid-new";
  f.claimants.put(again);
  // Reserved, but on its node's network; and one whose claim names a pool elsewhere.
  f.claims.put(allocatedClaim("host", "gvirtus-system/be-1", {"host"}));
  json host = claimant("host", "host", true);
  host["spec"]["hostNetwork"] = true;
  f.claimants.put(host);
  f.claims.put(allocatedClaim("old", "old-gvirtus/be-1", {"old"}));
  f.claimants.put(claimant("old", "old", true));
  for (const char* key : {"claimant:team-a/unreserved", "claimant:team-a/reserved",
                          "claimant:team-a/host", "claimant:team-a/old"}) {
    REQUIRE(f.follower.sync(key));
  }
  CHECK(f.api.deleteCount() == 0);
  CHECK(f.api.statusCount() == 0);
}

TEST_CASE("a bare claimant is marked and the leader follows claimants without being asked",
          "[backend-follower][dra]") {
  Fixture f;
  f.now += std::chrono::seconds(60);  // before the workers read it: 70 s after be-1's change
  f.backends.put(backendPod("be-1", "10.0.0.1"));
  std::jthread leader([&f](std::stop_token stop) { f.follower.run(stop); });
  // The pods come before their claims are allocated and reserved: the claims' events index
  // them.
  f.claimants.put(claimant("infer-a", "infer-a-gpu", true));
  f.claimants.put(claimant("lonely", "lonely-gpu", false));
  f.claims.put(allocatedClaim("infer-a-gpu", "gvirtus-system/be-1", {"infer-a"}));
  f.claims.put(allocatedClaim("lonely-gpu", "gvirtus-system/be-1", {"lonely"}));
  // Not ready past the grace.
  f.backends.put(backendPod("be-1", "10.0.0.1", "False"));
  REQUIRE(eventually([&] { return f.api.deleteCount() == 1; }));
  CHECK(f.api.deletes[0] == "team-a/infer-a uid-infer-a");
  REQUIRE(eventually([&] { return condition(f.claimants, "lonely") == "True"; }));
  CHECK(f.api.statuses.back()["status"]["conditions"][0]["reason"] == "BackendNotReady");
  // Serving again at its address: the mark goes back.
  f.backends.put(backendPod("be-1", "10.0.0.1", "True"));
  REQUIRE(eventually([&] { return condition(f.claimants, "lonely") == "False"; }));
  CHECK(f.api.deleteCount() == 1);
}

TEST_CASE("a claimant of a claim it names itself is marked, never deleted",
          "[backend-follower][dra]") {
  // Deleting it would not help: the claim stays allocated to the lost device while any pod
  // is reserved on it, and the scheduler reserves the recreated pod on it at once.
  Fixture f;  // be-1 is gone
  f.claims.put(allocatedClaim("shared", "gvirtus-system/be-1", {"infer-a"}));
  json pod = claimant("infer-a", "shared", true);
  pod["spec"]["resourceClaims"][0]["resourceClaimName"] = "shared";
  f.claimants.put(compactClaimant(pod));
  REQUIRE(f.follower.sync("claimant:team-a/infer-a"));
  CHECK(f.api.deleteCount() == 0);
  REQUIRE(f.api.statusCount() == 1);
  CHECK(condition(f.claimants, "infer-a") == "True");
  const std::string message = f.api.statuses[0]["status"]["conditions"][0]["message"];
  CHECK(message.find("backend pod gvirtus-system/be-1 is gone") != std::string::npos);
  CHECK(message.find("claim shared") != std::string::npos);
}

TEST_CASE("a claimant with a lost claim of its own naming is marked even when another is lost",
          "[backend-follower][dra]") {
  Fixture f;  // be-1 and be-2 are gone
  f.claims.put(allocatedClaim("infer-a-gpu", "gvirtus-system/be-1", {"infer-a"}));
  f.claims.put(allocatedClaim("shared", "gvirtus-system/be-2", {"infer-a"}));
  json pod = claimant("infer-a", "infer-a-gpu", true);
  pod["spec"]["resourceClaims"].push_back({{"name", "more"}, {"resourceClaimName", "shared"}});
  f.claimants.put(compactClaimant(pod));
  REQUIRE(f.follower.sync("claimant:team-a/infer-a"));
  CHECK(f.api.deleteCount() == 0);
  CHECK(condition(f.claimants, "infer-a") == "True");
}

TEST_CASE("a claimant the webhook gave a backend itself follows that backend only",
          "[backend-follower][dra]") {
  Fixture f;
  f.backends.put(backendPod("be-1", "10.0.0.1"));  // the webhook's choice serves
  f.frontends.put(frontend("infer-a", true));
  f.claims.put(allocatedClaim("infer-a-gpu", "gvirtus-system/be-gone", {"infer-a"}));
  f.claimants.put(claimant("infer-a", "infer-a-gpu", true));
  REQUIRE(f.follower.sync("claimant:team-a/infer-a"));
  CHECK(f.api.deleteCount() == 0);
  CHECK(f.api.statusCount() == 0);
}

TEST_CASE("only owners that replace their pods count, by kind and API group", "[backend-loss]") {
  auto owned = [](const std::string& apiVersion, const std::string& kind) {
    return json{{"metadata",
                 {{"ownerReferences", json::array({{{"apiVersion", apiVersion},
                                                    {"kind", kind},
                                                    {"name", "w"},
                                                    {"controller", true}}})}}}};
  };
  CHECK(controllingOwner(owned("apps/v1", "ReplicaSet")) == "ReplicaSet w");
  CHECK(controllingOwner(owned("batch/v1", "Job")) == "Job w");
  CHECK(controllingOwner(owned("batch.volcano.sh/v1alpha1", "Job")).empty());
  CHECK(controllingOwner(owned("argoproj.io/v1alpha1", "Workflow")).empty());
  // What the caches keep says the same without the group.
  CHECK(controllingOwner(json{
            {"metadata", {{"ownerReferences", compactOwners(owned("apps/v1", "StatefulSet"))}}}}) ==
        "StatefulSet w");
  CHECK(compactOwners(owned("batch.volcano.sh/v1alpha1", "Job")).is_null());
}

TEST_CASE("with device taints, a lost backend's claimants are left to kube-controller-manager",
          "[backend-follower][dra]") {
  Fixture f{true};
  f.backends.put(backendPod("be-1", "10.0.0.1"));
  f.claims.put(allocatedClaim("infer-a-gpu", "gvirtus-system/be-1", {"infer-a"}));
  f.claimants.put(claimant("infer-a", "infer-a-gpu", true));
  f.claims.put(allocatedClaim("lonely-gpu", "gvirtus-system/be-1", {"lonely"}));
  f.claimants.put(claimant("lonely", "lonely-gpu", false));
  REQUIRE(f.follower.sync("claimant:team-a/infer-a"));
  CHECK(f.api.ruleCount() == 0);  // serving

  f.backends.remove("gvirtus-system", "be-1");
  for (int i = 0; i < 2; ++i) {
    REQUIRE(f.follower.sync("claimant:team-a/infer-a"));
    REQUIRE(f.follower.sync("claimant:team-a/lonely"));
  }
  // One rule for the backend pod, made once; no pod deleted or marked by the follower.
  REQUIRE(f.api.ruleCount() == 1);
  CHECK(f.api.ruleCreates == 1);
  const json& rule = f.api.rules.begin()->second;
  CHECK(rule["metadata"]["name"] == "gvirtus-lost-gvirtus-system-be-1");
  CHECK(rule["spec"] == json::parse(R"({"deviceSelector": {"driver": "gpu.gvirtus.io",
      "pool": "gvirtus-system/be-1"}, "taint": {"key": "gpu.gvirtus.io/backend-lost",
      "value": "gone", "effect": "NoExecute"}})"));
  CHECK(ruleBackendPod(rule) == "gvirtus-system/be-1");
  CHECK(f.api.deleteCount() == 0);
  CHECK(f.api.statusCount() == 0);
  CHECK(metricValue(f.registry.render(),
                    R"(gvirtus_webhook_backend_lost_pods_total{action="tainted"})") == 2);

  // Needed while a claim holds the devices; taken back once none does (the pods evicted,
  // their reservations and claims gone).
  REQUIRE(f.follower.sync("taint-rule:gvirtus-system/be-1"));
  CHECK(f.api.ruleCount() == 1);
  f.claims.remove("team-a", "infer-a-gpu");
  REQUIRE(f.follower.sync("taint-rule:gvirtus-system/be-1"));
  CHECK(f.api.ruleCount() == 1);
  f.claims.remove("team-a", "lonely-gpu");
  REQUIRE(f.follower.sync("taint-rule:gvirtus-system/be-1"));
  CHECK(f.api.ruleCount() == 0);
}

TEST_CASE("with device taints, a backend serving again is untainted, and a new leader adopts rules",
          "[backend-follower][dra]") {
  Fixture f{true};
  f.now += std::chrono::seconds(60);  // 70 s after be-1's change: past the grace
  // A rule a previous leader made for be-2 (gone, no claim), and another driver's.
  f.api.rules["gvirtus-lost-gvirtus-system-be-2"] = lostBackendRule("gvirtus-system/be-2", "gone");
  json foreign = lostBackendRule("gvirtus-system/be-3", "gone");
  foreign["metadata"]["name"] = "vendor-rule";
  foreign["spec"]["deviceSelector"]["driver"] = "gpu.example.com";
  f.api.rules["vendor-rule"] = foreign;
  f.backends.put(backendPod("be-1", "10.0.0.1", "False"));
  // be-1 also serves a bare pod of the label path (marked, it follows be-1 still): be-1's
  // changes queue that pod and the rule alike.
  f.frontends.put(frontend("lonely", false));
  std::jthread leader([&f](std::stop_token stop) { f.follower.run(stop); });
  // Adopted and, no claim holding be-2's devices, taken back; the other driver's is not ours.
  REQUIRE(eventually([&] { return f.api.ruleCount() == 1; }));
  CHECK(f.api.rules.contains("vendor-rule"));

  f.claims.put(allocatedClaim("infer-a-gpu", "gvirtus-system/be-1", {"infer-a"}));
  f.claimants.put(claimant("infer-a", "infer-a-gpu", true));
  REQUIRE(eventually([&] { return f.api.ruleCount() == 2; }));
  {
    std::lock_guard lock(f.api.mutex);
    CHECK(f.api.rules["gvirtus-lost-gvirtus-system-be-1"]["spec"]["taint"]["value"] == "not-ready");
  }
  f.backends.put(backendPod("be-1", "10.0.0.1", "True"));
  REQUIRE(eventually([&] { return f.api.ruleCount() == 1; }));
}
