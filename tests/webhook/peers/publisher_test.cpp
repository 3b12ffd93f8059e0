// The peer publisher without an API server: its caches are FakeObjectCaches and its writes
// go to a recorder that, like the API server and the watch after it, stores the patched
// backend pod with a new resourceVersion. The publisher on the real control plane is in
// peer_publisher_integration_test.cpp.
#include "webhook/peers/publisher.h"

#include <catch2/catch.hpp>
#include <mutex>
#include <thread>

#include "support/cluster_env.h"
#include "support/fake_object_cache.h"
#include "webhook/base/metrics.h"

using namespace gvirtus::webhook;
using gvirtus::MetricsRegistry;
using gvirtus::Result;
using gvirtus::testing::eventually;
using gvirtus::testing::FakeObjectCache;
using gvirtus::testing::metricValue;
using nlohmann::json;

namespace {

json backendPod(const std::string& name, const std::string& ip, const std::string& rv = "1") {
  json pod = {{"metadata",
               {{"name", name},
                {"namespace", "gvirtus-system"},
                {"resourceVersion", rv},
                {"annotations", {{"gvirtus.io/load", "{}"}}}}},
              {"status", {{"phase", "Running"}}}};
  if (!ip.empty()) {
    pod["status"]["podIP"] = ip;
  }
  return pod;
}

json frontend(const std::string& name, const std::string& ip,
              const std::string& backend = "gvirtus-system/be-1",
              const std::string& endpoint = "10.0.0.1:9999") {
  json pod = {
      {"metadata",
       {{"name", name},
        {"namespace", "team-a"},
        {"resourceVersion", "10"},
        {"creationTimestamp", "2026-11-25T10:00:00Z"},
        {"labels", {{"gvirtus.io/enabled", "true"}}},
        {"annotations", {{"gvirtus.io/backend", endpoint}, {"gvirtus.io/backend-pod", backend}}}}},
      {"status", {{"phase", "Pending"}}}};
  if (!ip.empty()) {
    pod["status"]["podIP"] = ip;
  }
  return pod;
}

// The API server's side of the writes: each merge patch recorded and, unless held back,
// applied to the backend pod in the cache with the next resourceVersion (the watch event).
struct FakeApi {
  explicit FakeApi(FakeObjectCache& cache) : backends(cache) {}

  FakeObjectCache& backends;
  std::mutex mutex;
  std::vector<std::pair<std::string, json>> writes;  // backend pod, patch
  bool echo = true;
  int failNext = 0;
  int failStatus = 500;
  int resourceVersion = 100;

  gvirtus::webhook::PeerWriter writer() {
    return [this](const std::string& ns, const std::string& name,
                  const std::string& text) -> Result<void> {
      json stored;
      {
        std::lock_guard lock(mutex);
        if (failNext > 0) {
          --failNext;
          return gvirtus::fail("the API server is unavailable", failStatus);
        }
        json patch = json::parse(text);
        writes.emplace_back(ns + "/" + name, patch);
        auto pod = backends.get(ns, name);
        if (!echo || !pod) {
          return {};
        }
        stored = *pod;
        stored.merge_patch(patch);
        stored["metadata"]["resourceVersion"] = std::to_string(++resourceVersion);
      }
      backends.put(stored);
      return {};
    };
  }
  size_t count() {
    std::lock_guard lock(mutex);
    return writes.size();
  }
  std::pair<std::string, json> at(size_t i) {
    std::lock_guard lock(mutex);
    return writes.at(i);
  }
  // The value of the last write to `pod`; "(none)" when none was written.
  std::string lastValue(const std::string& pod) {
    std::lock_guard lock(mutex);
    for (auto it = writes.rbegin(); it != writes.rend(); ++it) {
      if (it->first == pod) {
        return it->second["metadata"]["annotations"]["gvirtus.io/peers"];
      }
    }
    return "(none)";
  }
};

std::string carried(const FakeObjectCache& backends, const std::string& name) {
  auto pod = backends.get("gvirtus-system", name);
  if (!pod || !(*pod)["metadata"]["annotations"].contains("gvirtus.io/peers")) {
    return "(absent)";
  }
  return (*pod)["metadata"]["annotations"]["gvirtus.io/peers"];
}

// What one sync did: "wrote", "unchanged", or the error.
std::string sync(PeerPublisher& publisher, const std::string& backendPod) {
  auto wrote = publisher.sync(backendPod);
  if (!wrote) {
    return "error: " + wrote.error().message;
  }
  return *wrote ? "wrote" : "unchanged";
}

json peersPatch(const std::string& value, const std::string& memory = "") {
  return {{"metadata",
           {{"annotations", {{"gvirtus.io/peers", value}, {"gvirtus.io/peer-memory", memory}}}}}};
}

}  // namespace

TEST_CASE("the publisher writes one merge patch of gvirtus.io/peers, only when it changes",
          "[peer-publisher]") {
  FakeObjectCache backends, frontends;
  FakeApi api(backends);
  MetricsRegistry registry;
  WebhookMetrics metrics(registry);
  PeerPublisher publisher(backends, frontends, api.writer(), &metrics);
  backends.start();
  frontends.start();
  backends.put(backendPod("be-1", "10.0.0.1"));
  frontends.put(frontend("a", "10.1.0.5"));

  // Never published: the first sync writes, the two keys (no share: an empty one) and
  // nothing else.
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  REQUIRE(api.count() == 1);
  CHECK(api.at(0).first == "gvirtus-system/be-1");
  CHECK(api.at(0).second == peersPatch("10.1.0.5"));
  CHECK(carried(backends, "be-1") == "10.1.0.5");
  CHECK(metricValue(registry.render(), "gvirtus_webhook_peer_publications_total") == 1);

  // Unchanged: no write, however often asked, whatever else changes on either pod.
  CHECK(sync(publisher, "gvirtus-system/be-1") == "unchanged");
  json busy = *backends.get("gvirtus-system", "be-1");
  busy["metadata"]["annotations"]["gvirtus.io/load"] = R"({"connections":1})";
  busy["metadata"]["resourceVersion"] = "200";
  backends.put(busy);
  json running = frontend("a", "10.1.0.5");
  running["status"]["phase"] = "Running";
  frontends.put(running);
  CHECK(sync(publisher, "gvirtus-system/be-1") == "unchanged");
  CHECK(api.count() == 1);

  // A second pod gets its address: both, in address order.
  frontends.put(frontend("b", "10.1.0.10"));
  frontends.put(frontend("c", "10.1.0.2"));
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-1") == "10.1.0.2,10.1.0.5,10.1.0.10");

  // All gone: the empty list, written as "".
  frontends.remove("team-a", "a");
  json done = frontend("b", "10.1.0.10");
  done["status"]["phase"] = "Succeeded";
  frontends.put(done);
  json deleting = frontend("c", "10.1.0.2");
  deleting["metadata"]["deletionTimestamp"] = "2026-11-25T10:05:00Z";
  frontends.put(deleting);
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-1") == "");
  CHECK(carried(backends, "be-1") == "");
  CHECK(sync(publisher, "gvirtus-system/be-1") == "unchanged");

  // A backend pod that is gone: nothing to write, no error.
  CHECK(sync(publisher, "gvirtus-system/be-9") == "unchanged");
  CHECK(api.count() == 3);
}

TEST_CASE("a backend pod gets its list once it has an address", "[peer-publisher]") {
  FakeObjectCache backends, frontends;
  FakeApi api(backends);
  PeerPublisher publisher(backends, frontends, api.writer(), nullptr);
  backends.start();
  frontends.start();
  backends.put(backendPod("be-1", ""));
  std::jthread leader([&publisher](std::stop_token stop) { publisher.run(stop); });
  // Created, not running yet: nothing can connect, nothing is written.
  CHECK(sync(publisher, "gvirtus-system/be-1") == "unchanged");
  CHECK(api.count() == 0);
  // Its address: the (empty) list follows at once.
  backends.put(backendPod("be-1", "10.0.0.1", "2"));
  REQUIRE(eventually([&] { return carried(backends, "be-1") == ""; }));
  CHECK(api.count() == 1);
}

TEST_CASE("a write the cache has not seen yet is not written again", "[peer-publisher]") {
  FakeObjectCache backends, frontends;
  FakeApi api(backends);
  api.echo = false;  // the watch is behind: the cache keeps the version written over
  PeerPublisher publisher(backends, frontends, api.writer(), nullptr);
  backends.put(backendPod("be-1", "10.0.0.1"));
  frontends.put(frontend("a", "10.1.0.5"));
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(sync(publisher, "gvirtus-system/be-1") == "unchanged");
  CHECK(api.count() == 1);
  // The pod changed since (another version): what it carries counts again, and here it
  // carries nothing.
  backends.put(backendPod("be-1", "10.0.0.1", "2"));
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.count() == 2);
}

TEST_CASE("hostile and stale pods never reach a backend's list", "[peer-publisher]") {
  FakeObjectCache backends, frontends;
  FakeApi api(backends);
  PeerPublisher publisher(backends, frontends, api.writer(), nullptr);
  backends.put(backendPod("be-1", "10.0.0.1"));
  backends.put(backendPod("be-2", "10.0.0.2"));
  frontends.put(frontend("mine", "10.1.0.5"));
  frontends.put(frontend("theirs", "10.1.0.6", "gvirtus-system/be-2", "10.0.0.2:9999"));
  // Names be-1 but was given be-2's address: counted for neither.
  frontends.put(frontend("mixed", "10.1.0.7", "gvirtus-system/be-1", "10.0.0.2:9999"));
  // Unlabelled (the cache would not hold it; the decision does not rely on that).
  json forged = frontend("forged", "10.1.0.8");
  forged["metadata"].erase("labels");
  frontends.put(forged);
  // Still waiting behind the gate.
  json gated = frontend("gated", "10.1.0.9");
  gated["spec"]["schedulingGates"] = json::array({{{"name", "gvirtus.io/backend"}}});
  frontends.put(gated);
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(sync(publisher, "gvirtus-system/be-2") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-1") == "10.1.0.5");
  CHECK(api.lastValue("gvirtus-system/be-2") == "10.1.0.6");

  // be-1 is replaced by a pod with another name at the same address: the old pods' claims
  // name the old pod, and the new one starts empty.
  backends.remove("gvirtus-system", "be-1");
  backends.put(backendPod("be-1b", "10.0.0.1"));
  CHECK(sync(publisher, "gvirtus-system/be-1b") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-1b") == "");
}

TEST_CASE("a failed write is an error and is counted, but not a backend pod deleted meanwhile",
          "[peer-publisher]") {
  FakeObjectCache backends, frontends;
  FakeApi api(backends);
  MetricsRegistry registry;
  WebhookMetrics metrics(registry);
  PeerPublisher publisher(backends, frontends, api.writer(), &metrics);
  backends.put(backendPod("be-1", "10.0.0.1"));
  frontends.put(frontend("a", "10.1.0.5"));
  api.failNext = 1;
  auto failed = publisher.sync("gvirtus-system/be-1");
  REQUIRE_FALSE(failed.has_value());
  CHECK(failed.error().message.find("gvirtus-system/be-1") != std::string::npos);
  CHECK(metricValue(registry.render(), "gvirtus_webhook_peer_publication_failures_total") == 1);
  api.failNext = 1;
  api.failStatus = 404;
  CHECK(sync(publisher, "gvirtus-system/be-1") == "unchanged");
  CHECK(metricValue(registry.render(), "gvirtus_webhook_peer_publication_failures_total") == 1);
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(carried(backends, "be-1") == "10.1.0.5");
}

TEST_CASE("more peers than the cap: the list is cut and the sync still succeeds",
          "[peer-publisher]") {
  FakeObjectCache backends, frontends;
  FakeApi api(backends);
  PeerPublisher publisher(backends, frontends, api.writer(), nullptr,
                          PeerPublisherOptions{.port = 9999, .maxPeers = 2});
  backends.put(backendPod("be-1", "10.0.0.1"));
  for (int i = 1; i <= 3; ++i) {
    frontends.put(frontend("p" + std::to_string(i), "10.1.0." + std::to_string(i)));
  }
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-1") == "10.1.0.1,10.1.0.2");
  CHECK(sync(publisher, "gvirtus-system/be-1") == "unchanged");
}

TEST_CASE("changes are published as they happen while leading, and not at all otherwise",
          "[peer-publisher]") {
  FakeObjectCache backends, frontends;
  FakeApi api(backends);
  MetricsRegistry registry;
  WebhookMetrics metrics(registry);
  PeerPublisher publisher(backends, frontends, api.writer(), &metrics);
  backends.start();
  frontends.start();
  backends.put(backendPod("be-1", "10.0.0.1"));
  backends.put(backendPod("be-2", "10.0.0.2"));
  // Before it leads: claims are indexed, nothing is written.
  frontends.put(frontend("a", "10.1.0.5"));
  CHECK(api.count() == 0);

  {
    std::jthread leader([&publisher](std::stop_token stop) { publisher.run(stop); });
    // Leadership gained with synced caches: every backend pod once.
    REQUIRE(eventually([&] {
      return carried(backends, "be-1") == "10.1.0.5" && carried(backends, "be-2") == "";
    }));
    CHECK(api.count() == 2);

    // A new pod of be-2: scheduled (no IP yet), then given its address.
    frontends.put(frontend("b", "", "gvirtus-system/be-2", "10.0.0.2:9999"));
    frontends.put(frontend("b", "10.1.0.6", "gvirtus-system/be-2", "10.0.0.2:9999"));
    REQUIRE(eventually([&] { return carried(backends, "be-2") == "10.1.0.6"; }));
    // A pod released from the gate with its address already.
    json gated = frontend("c", "10.1.0.7");
    gated["spec"]["schedulingGates"] = json::array({{{"name", "gvirtus.io/backend"}}});
    frontends.put(gated);
    frontends.put(frontend("c", "10.1.0.7"));
    REQUIRE(eventually([&] { return carried(backends, "be-1") == "10.1.0.5,10.1.0.7"; }));
    // Deleted, and its backend pod's list shrinks.
    frontends.remove("team-a", "a");
    REQUIRE(eventually([&] { return carried(backends, "be-1") == "10.1.0.7"; }));
    // Someone's edit of the list is put right (the policies let only this account write
    // it; a lost write looks the same).
    json edited = *backends.get("gvirtus-system", "be-1");
    edited["metadata"]["annotations"]["gvirtus.io/peers"] = "10.6.6.6";
    edited["metadata"]["resourceVersion"] = "500";
    backends.put(edited);
    REQUIRE(eventually([&] { return carried(backends, "be-1") == "10.1.0.7"; }));
    // Each change one write (the echo of each write writes nothing): 2 at the start, be-2,
    // be-1 twice and the repair.
    CHECK(api.count() == 6);
    // Counted once the write has returned, a moment after the cache shows it.
    CHECK(eventually([&] {
      return metricValue(registry.render(), "gvirtus_webhook_peer_publications_total") == 6;
    }));
  }

  // Leadership lost: changes are indexed but not written.
  const size_t written = api.count();
  frontends.put(frontend("d", "10.1.0.8"));
  CHECK(api.count() == written);
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(carried(backends, "be-1") == "10.1.0.7,10.1.0.8");
}

TEST_CASE("a new leader waits for synced caches before it publishes", "[peer-publisher]") {
  FakeObjectCache backends, frontends;
  FakeApi api(backends);
  PeerPublisher publisher(backends, frontends, api.writer(), nullptr);
  backends.start();
  frontends.start();
  frontends.holdSync(true);
  backends.put(backendPod("be-1", "10.0.0.1"));
  std::jthread leader([&publisher](std::stop_token stop) { publisher.run(stop); });
  // A half-listed cache would publish an empty list and cut off running pods.
  frontends.put(frontend("a", "10.1.0.5"));
  frontends.holdSync(false);
  REQUIRE(eventually([&] { return carried(backends, "be-1") == "10.1.0.5"; }));
  CHECK(api.count() == 1);
}

TEST_CASE("pods of one backend that start together are published in one write",
          "[peer-publisher]") {
  FakeObjectCache backends, frontends;
  FakeApi api(backends);
  // Long enough that the five puts below always fall within it.
  PeerPublisher publisher(backends, frontends, api.writer(), nullptr,
                          {.coalesce = std::chrono::seconds(2)});
  backends.start();
  frontends.start();
  backends.put(backendPod("be-1", "10.0.0.1"));
  std::jthread leader([&publisher](std::stop_token stop) { publisher.run(stop); });
  REQUIRE(eventually([&] { return carried(backends, "be-1") == ""; }));
  const size_t before = api.count();

  for (int i = 1; i <= 5; ++i) {
    frontends.put(frontend("pod-" + std::to_string(i), "10.1.0." + std::to_string(i)));
  }
  REQUIRE(eventually(
      [&] { return carried(backends, "be-1") == "10.1.0.1,10.1.0.2,10.1.0.3,10.1.0.4,10.1.0.5"; }));
  CHECK(api.count() == before + 1);
}

TEST_CASE("a pod deleted at once or stripped of its label leaves its backend's list",
          "[peer-publisher]") {
  FakeObjectCache backends, frontends;
  FakeApi api(backends);
  PeerPublisher publisher(backends, frontends, api.writer(), nullptr);
  backends.start();
  frontends.start();
  backends.put(backendPod("be-1", "10.0.0.1"));
  frontends.put(frontend("a", "10.1.0.5"));
  frontends.put(frontend("b", "10.1.0.6"));
  frontends.put(frontend("c", "10.1.0.7"));
  std::jthread leader([&publisher](std::stop_token stop) { publisher.run(stop); });
  REQUIRE(eventually([&] { return carried(backends, "be-1") == "10.1.0.5,10.1.0.6,10.1.0.7"; }));

  // The DELETED event of a pod deleted with no grace carries its deletionTimestamp, and
  // that of a pod that lost its label carries no label: neither object claims anything.
  json forced = frontend("a", "10.1.0.5");
  forced["metadata"]["deletionTimestamp"] = "2026-11-25T10:05:00Z";
  frontends.removeAs(forced);
  REQUIRE(eventually([&] { return carried(backends, "be-1") == "10.1.0.6,10.1.0.7"; }));
  json unlabelled = frontend("b", "10.1.0.6");
  unlabelled["metadata"]["labels"] = json::object();
  frontends.removeAs(unlabelled);
  REQUIRE(eventually([&] { return carried(backends, "be-1") == "10.1.0.7"; }));
  // A pod given a new address by the same backend pod: the old one leaves.
  frontends.put(frontend("c", "10.1.0.9"));
  CHECK(eventually([&] { return carried(backends, "be-1") == "10.1.0.9"; }));
}

namespace {

json gpuClaim(const std::string& name, const std::string& backendPod, json reservedFor) {
  return {
      {"metadata",
       {{"name", name}, {"namespace", "team-b"}, {"uid", name + "-uid"}, {"resourceVersion", "1"}}},
      {"status",
       {{"allocation",
         {{"devices",
           {{"results", json::array({{{"driver", "gpu.gvirtus.io"},
                                      {"request", "gpu"},
                                      {"pool", backendPod},
                                      {"device", "gpu-0"}}})}}}}},
        {"reservedFor", std::move(reservedFor)}}}};
}

// A pod that names claim c1 (or `claim`).
json claimant(const std::string& name, const std::string& uid, const std::string& ip,
              const std::string& phase = "Running", const std::string& claim = "c1") {
  json pod = {
      {"metadata", {{"name", name}, {"namespace", "team-b"}, {"uid", uid}}},
      {"spec",
       {{"resourceClaims", json::array({{{"name", "gpu"}, {"resourceClaimName", claim}}})}}},
      {"status", {{"phase", phase}}}};
  if (!ip.empty()) {
    pod["status"]["podIP"] = ip;
  }
  return pod;
}

json reservation(const std::string& pod, const std::string& uid) {
  return {{"resource", "pods"}, {"name", pod}, {"uid", uid}};
}

// A publisher with DRA on (--dra): its four caches started, its writes to `api`.
struct WithClaims {
  FakeObjectCache backends, frontends, claims, claimants;
  FakeApi api{backends};
  PeerPublisher publisher{backends, frontends, api.writer(),
                          nullptr,  {},        ClaimantCaches{&claims, &claimants}};

  WithClaims() {
    for (auto* cache : {&backends, &frontends, &claims, &claimants}) {
      cache->start();
    }
  }
};

}  // namespace

TEST_CASE("with DRA, the pods reserved a claim on a backend's device are its peers",
          "[peer-publisher][claim-peers]") {
  WithClaims w;
  auto& [backends, frontends, claims, claimants, api, publisher] = w;
  backends.put(backendPod("be-1", "10.0.0.1"));
  backends.put(backendPod("be-2", "10.0.0.2"));
  frontends.put(frontend("labelled", "10.1.0.9"));

  // The pod starts before its claim is reserved, and has no address yet.
  claimants.put(claimant("app", "app-uid", ""));
  claims.put(gpuClaim("c1", "gvirtus-system/be-1", json::array({reservation("app", "app-uid")})));
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-1") == "10.1.0.9");
  // It gets its address: it joins the list of be-1, and only be-1's.
  claimants.put(claimant("app", "app-uid", "10.2.0.7"));
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-1") == "10.1.0.9,10.2.0.7");
  CHECK(sync(publisher, "gvirtus-system/be-2") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-2") == "");

  // A pod of the same name but another UID (deleted and made again) is not the one reserved.
  claimants.put(claimant("app", "other-uid", "10.2.0.8"));
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-1") == "10.1.0.9");
  claimants.put(claimant("app", "app-uid", "10.2.0.7"));
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");

  // Finished, or its claim released, or the claim gone: it leaves the list.
  claimants.put(claimant("app", "app-uid", "10.2.0.7", "Succeeded"));
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-1") == "10.1.0.9");
  claimants.put(claimant("app", "app-uid", "10.2.0.7"));
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  claims.put(gpuClaim("c1", "gvirtus-system/be-1", json::array()));
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-1") == "10.1.0.9");
  claims.put(gpuClaim("c1", "gvirtus-system/be-1", json::array({reservation("app", "app-uid")})));
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-1") == "10.1.0.9,10.2.0.7");
  claims.remove("team-b", "c1");
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-1") == "10.1.0.9");

  // A reservation for a pod that does not name the claim (written by anyone but the
  // scheduler), or for a pod on its node's network: not let in.
  claimants.put(claimant("other", "other-uid", "10.2.0.9", "Running", "c-else"));
  json onHost = claimant("host", "host-uid", "10.0.0.77");
  onHost["spec"]["hostNetwork"] = true;
  claimants.put(onHost);
  claims.put(
      gpuClaim("c1", "gvirtus-system/be-1",
               json::array({reservation("other", "other-uid"), reservation("host", "host-uid")})));
  CHECK(sync(publisher, "gvirtus-system/be-1") == "unchanged");
  CHECK(api.lastValue("gvirtus-system/be-1") == "10.1.0.9");
}

TEST_CASE("with DRA, a claimant counts for its backend pod at that pod's current address",
          "[peer-publisher][claim-peers]") {
  WithClaims w;
  auto& [backends, frontends, claims, claimants, api, publisher] = w;
  // The claim's events come before the backend pod is in its cache (caches sync in any order).
  claimants.put(claimant("app", "app-uid", "10.2.0.7"));
  claims.put(gpuClaim("c1", "gvirtus-system/be-1", json::array({reservation("app", "app-uid")})));
  backends.put(backendPod("be-1", "10.0.0.1"));
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-1") == "10.2.0.7");
}

TEST_CASE("the publisher writes each peer's GPU memory share beside the list", "[peer-publisher]") {
  FakeObjectCache backends, frontends;
  FakeApi api(backends);
  PeerPublisher publisher(backends, frontends, api.writer(), nullptr);
  backends.start();
  frontends.start();
  backends.put(backendPod("be-1", "10.0.0.1"));
  auto asking = [](const std::string& name, const std::string& ip, json annotations) {
    json pod = frontend(name, ip);
    pod["metadata"]["annotations"]["gvirtus.io/backend-gpu"] = "0";
    pod["metadata"]["annotations"].update(annotations);
    return pod;
  };
  frontends.put(asking("memory", "10.1.0.5", {{"gvirtus.io/gpu-memory", "4Gi"}}));
  frontends.put(asking("kai", "10.1.0.6", {{"gpu-memory", "2048"}}));
  frontends.put(asking("fraction", "10.1.0.7", {{"gpu-fraction", "0.25"}}));
  frontends.put(frontend("whole", "10.1.0.8"));

  // No load report yet: a fraction of an unknown GPU is no share (not capped until known).
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.at(0).second ==
        peersPatch("10.1.0.5,10.1.0.6,10.1.0.7,10.1.0.8", "10.1.0.5=4096,10.1.0.6=2048"));

  // The report lists GPU 0 of 40 GiB: the fraction's share is a quarter of it. The report's
  // usual changes (connections, used memory) alone ask for nothing.
  json reported = *backends.get("gvirtus-system", "be-1");
  reported["metadata"]["annotations"]["gvirtus.io/load"] =
      R"({"connections":3,"maxSessions":16,"gpus":[{"index":0,"memoryTotalMiB":40960,)"
      R"("memoryUsedMiB":100,"utilization":0}]})";
  reported["metadata"]["resourceVersion"] = "300";
  backends.put(reported);
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-1") == "10.1.0.5,10.1.0.6,10.1.0.7,10.1.0.8");
  CHECK(api.at(1).second["metadata"]["annotations"]["gvirtus.io/peer-memory"] ==
        "10.1.0.5=4096,10.1.0.6=2048,10.1.0.7=10240");
  CHECK(sync(publisher, "gvirtus-system/be-1") == "unchanged");

  // A share edited on the backend pod (by anyone) is written back.
  json edited = *backends.get("gvirtus-system", "be-1");
  edited["metadata"]["annotations"]["gvirtus.io/peer-memory"] = "10.1.0.5=999999";
  edited["metadata"]["resourceVersion"] = "400";
  backends.put(edited);
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.at(2).second["metadata"]["annotations"]["gvirtus.io/peer-memory"] ==
        "10.1.0.5=4096,10.1.0.6=2048,10.1.0.7=10240");
}

TEST_CASE("with DRA, a claimant's share is the memory the scheduler counted for its claim",
          "[peer-publisher][claim-peers]") {
  WithClaims w;
  auto& [backends, frontends, claims, claimants, api, publisher] = w;
  backends.put(backendPod("be-1", "10.0.0.1"));
  claimants.put(claimant("sized", "sized-uid", "10.2.0.7"));
  claimants.put(claimant("shared", "shared-uid", "10.2.0.8", "Running", "c2"));
  json sized =
      gpuClaim("c1", "gvirtus-system/be-1", json::array({reservation("sized", "sized-uid")}));
  sized["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] = {{"memory", "8Gi"},
                                                                                {"sessions", "1"}};
  claims.put(sized);
  // A claim that named no memory takes the least there is (1Mi): it shares the GPU, no cap.
  json shared =
      gpuClaim("c2", "gvirtus-system/be-1", json::array({reservation("shared", "shared-uid")}));
  shared["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] = {{"memory", "1Mi"},
                                                                                 {"sessions", "1"}};
  claims.put(shared);
  CHECK(sync(publisher, "gvirtus-system/be-1") == "wrote");
  CHECK(api.lastValue("gvirtus-system/be-1") == "10.2.0.7,10.2.0.8");
  CHECK(api.at(api.count() - 1).second["metadata"]["annotations"]["gvirtus.io/peer-memory"] ==
        "10.2.0.7=8192");
}
