// Which pods a backend pod lets connect (gvirtus.io/peers): only what the webhook wrote,
// for that backend pod at its current address, of pods that are released, alive and have
// an IPv4 address. Tenants write any label and annotation they like on their own pods.
#include "webhook/peers/backend_peers.h"

#include <catch2/catch.hpp>

#include "common/cache/object_cache.h"
#include "webhook/pods/pod_fields.h"

using namespace gvirtus::webhook;
using nlohmann::json;

namespace {

json backendPod(const std::string& name, const std::string& ip) {
  json pod = {{"metadata",
               {{"name", name},
                {"namespace", "gvirtus-system"},
                {"resourceVersion", "1"},
                {"labels", {{"app.kubernetes.io/component", "backend"}}}}},
              {"status", {{"phase", "Running"}}}};
  if (!ip.empty()) {
    pod["status"]["podIP"] = ip;
    pod["status"]["podIPs"] = json::array({{{"ip", ip}}});
  }
  return pod;
}

// A GVirtuS pod as the webhook left it when it gave it `backend` (the pod) at `endpoint`,
// running with `ip`.
json frontend(const std::string& name, const std::string& ip,
              const std::string& backend = "gvirtus-system/be-1",
              const std::string& endpoint = "10.0.0.1:9999") {
  json pod = {
      {"metadata",
       {{"name", name},
        {"namespace", "team-a"},
        {"resourceVersion", "10"},
        {"creationTimestamp", "2026-11-25T10:00:00Z"},
        {"labels", {{"gvirtus.io/enabled", "true"}, {"app", "trainer"}}},
        {"annotations",
         {{"gvirtus.io/backend", endpoint},
          {"gvirtus.io/backend-pod", backend},
          {"gvirtus.io/properties", "{}"},
          {"example.com/note", "kept out of the cache"}}}}},
      {"spec", {{"containers", json::array({{{"name", "app"}, {"image", "example/app"}}})}}},
      {"status",
       {{"phase", "Running"},
        {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
  if (!ip.empty()) {
    pod["status"]["podIP"] = ip;
    pod["status"]["podIPs"] = json::array({{{"ip", ip}}});
  }
  return pod;
}

const json kBe1 = backendPod("be-1", "10.0.0.1");

std::vector<std::string> peersOf(const json& backend, const std::vector<json>& pods) {
  std::vector<PeerClaim> claims;
  for (const auto& pod : pods) {
    if (auto claim = peerClaim(pod)) {
      claims.push_back(*claim);
    }
  }
  return backendPeers(gvirtus::cacheKey(backend), backendEndpoint(backend, 9999), claims);
}

}  // namespace

TEST_CASE("a released, running GVirtuS pod given the backend pod is its peer", "[peers]") {
  auto claim = peerClaim(frontend("a", "10.1.0.5"));
  REQUIRE(claim.has_value());
  CHECK(claim->backendPod == "gvirtus-system/be-1");
  CHECK(claim->endpoint == "10.0.0.1:9999");
  CHECK(claim->ip == "10.1.0.5");
  CHECK(backendEndpoint(kBe1, 9999) == "10.0.0.1:9999");
  CHECK(peersOf(kBe1, {frontend("a", "10.1.0.5")}) == std::vector<std::string>{"10.1.0.5"});
  // Pending with an IP already (containers starting): it connects as soon as they run.
  json starting = frontend("a", "10.1.0.5");
  starting["status"]["phase"] = "Pending";
  CHECK(peersOf(kBe1, {starting}) == std::vector<std::string>{"10.1.0.5"});
}

TEST_CASE("an unlabelled pod carrying a forged assignment is no peer", "[peers]") {
  json forged = frontend("evil", "10.1.0.66");
  forged["metadata"].erase("labels");
  CHECK_FALSE(peerClaim(forged).has_value());
  forged["metadata"]["labels"] = {{"gvirtus.io/enabled", "false"}};
  CHECK_FALSE(peerClaim(forged).has_value());
  forged["metadata"]["labels"] = {{"gvirtus.io/enabled", "True"}};
  CHECK_FALSE(peerClaim(forged).has_value());
  CHECK(peersOf(kBe1, {forged}).empty());
}

TEST_CASE("a pod counts only for the backend pod it names, at that pod's current address",
          "[peers]") {
  // gvirtus.io/backend names another IP: the pod was given an earlier backend pod whose
  // name a new one took, or the annotation is not the webhook's.
  CHECK(peersOf(kBe1, {frontend("old-ip", "10.1.0.5", "gvirtus-system/be-1", "10.0.0.9:9999")})
            .empty());
  // The right address but another port: not what this backend serves.
  CHECK(peersOf(kBe1, {frontend("port", "10.1.0.5", "gvirtus-system/be-1", "10.0.0.1:7000")})
            .empty());
  // The address of this one, the name of another: a new backend pod that reuses an old
  // one's IP does not inherit its pods.
  CHECK(peersOf(kBe1, {frontend("other", "10.1.0.5", "gvirtus-system/be-0", "10.0.0.1:9999")})
            .empty());
  // Without gvirtus.io/backend-pod (static backends; written by no current webhook).
  json bare = frontend("bare", "10.1.0.5");
  bare["metadata"]["annotations"].erase("gvirtus.io/backend-pod");
  CHECK_FALSE(peerClaim(bare).has_value());
  // Another namespace's pod of the same name is another pod.
  CHECK(peersOf(kBe1, {frontend("ns", "10.1.0.5", "default/be-1")}).empty());
  // A backend pod without an address yet has no peers.
  CHECK(peersOf(backendPod("be-1", ""), {frontend("a", "10.1.0.5")}).empty());
}

TEST_CASE("waiting, terminating, finished pods and pods without IPv4 are no peers", "[peers]") {
  json gated = frontend("gated", "10.1.0.5");
  gated["spec"]["schedulingGates"] = json::array({{{"name", "gvirtus.io/backend"}}});
  CHECK_FALSE(peerClaim(gated).has_value());
  // Another scheduler's gate does not matter: ours is gone, the webhook released the pod.
  json otherGate = frontend("other-gate", "10.1.0.5");
  otherGate["spec"]["schedulingGates"] = json::array({{{"name", "example.com/quota"}}});
  CHECK(peerClaim(otherGate).has_value());

  json terminating = frontend("terminating", "10.1.0.5");
  terminating["metadata"]["deletionTimestamp"] = "2026-11-25T10:05:00Z";
  CHECK_FALSE(peerClaim(terminating).has_value());
  for (const char* phase : {"Succeeded", "Failed"}) {
    json finished = frontend("finished", "10.1.0.5");
    finished["status"]["phase"] = phase;
    CHECK_FALSE(peerClaim(finished).has_value());
  }
  CHECK_FALSE(peerClaim(frontend("no-ip", "")).has_value());
  json ipv6 = frontend("v6", "fd00::5");
  CHECK_FALSE(peerClaim(ipv6).has_value());
  // IPv6-first dual stack: the IPv4 address of podIPs.
  json dual = frontend("dual", "fd00::5");
  dual["status"]["podIPs"] = json::array({{{"ip", "fd00::5"}}, {{"ip", "10.1.0.7"}}});
  REQUIRE(peerClaim(dual).has_value());
  CHECK(peerClaim(dual)->ip == "10.1.0.7");
  json junk = frontend("junk", "10.1.0.256");
  CHECK_FALSE(peerClaim(junk).has_value());

  CHECK(peersOf(kBe1, {gated, terminating, ipv6, frontend("no-ip", "")}).empty());
}

TEST_CASE("the list is in address order, each address once, per backend pod", "[peers]") {
  const json be2 = backendPod("be-2", "10.0.0.2");
  const std::vector<json> pods = {
      frontend("a", "10.1.0.10"),
      frontend("b", "10.1.0.2"),
      // Two pods with one address (hostNetwork pods of one node): the address once.
      frontend("c", "10.1.0.2"),
      frontend("d", "10.1.0.3", "gvirtus-system/be-2", "10.0.0.2:9999"),
      frontend("e", "10.1.0.4", "gvirtus-system/be-2", "10.0.0.1:9999"),
  };
  CHECK(peersOf(kBe1, pods) == std::vector<std::string>{"10.1.0.2", "10.1.0.10"});
  CHECK(peersOf(be2, pods) == std::vector<std::string>{"10.1.0.3"});
}

TEST_CASE("the annotation's value: comma-separated, empty for none, capped", "[peers]") {
  CHECK(peersValue({}).empty());
  CHECK(peersValue({"10.1.0.2"}) == "10.1.0.2");
  CHECK(peersValue({"10.1.0.2", "10.1.0.10", "10.1.0.11"}) == "10.1.0.2,10.1.0.10,10.1.0.11");
  CHECK(peersValue({"10.1.0.2", "10.1.0.10", "10.1.0.11"}, 2) == "10.1.0.2,10.1.0.10");
}

TEST_CASE("the cache of GVirtuS pods keeps what the peer decision reads, and little more",
          "[peers]") {
  json dual = frontend("dual", "fd00::5");
  dual["status"]["podIPs"] = json::array({{{"ip", "fd00::5"}}, {{"ip", "10.1.0.7"}}});
  json gated = frontend("gated", "10.1.0.5");
  gated["spec"]["schedulingGates"] =
      json::array({{{"name", "example.com/quota"}}, {{"name", "gvirtus.io/backend"}}});
  json terminating = frontend("terminating", "10.1.0.5");
  terminating["metadata"]["deletionTimestamp"] = "2026-11-25T10:05:00Z";
  json succeeded = frontend("done", "10.1.0.5");
  succeeded["status"]["phase"] = "Succeeded";
  json unlabelled = frontend("unlabelled", "10.1.0.5");
  unlabelled["metadata"]["labels"].erase("gvirtus.io/enabled");
  for (const json& pod : {frontend("a", "10.1.0.5"), frontend("no-ip", ""), dual, gated,
                          terminating, succeeded, unlabelled}) {
    CAPTURE(pod["metadata"]["name"]);
    CHECK(peerClaim(frontendFields(pod)) == peerClaim(pod));
  }
  const json kept = frontendFields(frontend("a", "10.1.0.5"));
  CHECK(kept["metadata"]["labels"] == json{{"gvirtus.io/enabled", "true"}});
  CHECK_FALSE(kept["metadata"]["annotations"].contains("example.com/note"));
  CHECK_FALSE(kept["metadata"]["annotations"].contains("gvirtus.io/properties"));
  CHECK_FALSE(kept.contains("spec"));  // released: no gate to keep
  CHECK(kept["status"] == json{{"phase", "Running"}, {"podIP", "10.1.0.5"}});
  // Of the gates only ours.
  CHECK(frontendFields(gated)["spec"] ==
        json{{"schedulingGates", json::array({{{"name", "gvirtus.io/backend"}}})}});
}

TEST_CASE("a mirror pod or a host-network pod is no peer, whatever it carries", "[peers]") {
  // Both name kBe1 as their backend, as the webhook would have written it.
  json mirror = frontend("static", "10.1.0.8");
  mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "0123abcd";
  json hostNetwork = frontend("host", "172.18.0.3");
  hostNetwork["spec"]["hostNetwork"] = true;
  for (const json& pod : {mirror, hostNetwork}) {
    CAPTURE(pod["metadata"]["name"]);
    const json kept = frontendFields(pod);
    CHECK_FALSE(peerClaim(kept).has_value());
    // No share and no assignment either: it cannot make a backend look full.
    CHECK_FALSE(kept["metadata"].contains("annotations"));
    CHECK_FALSE(kept["metadata"].contains("labels"));
    CHECK(kept["metadata"]["name"] == pod["metadata"]["name"]);
  }
  CHECK(peersOf(kBe1, {frontendFields(mirror), frontendFields(hostNetwork),
                       frontendFields(frontend("a", "10.1.0.5"))}) ==
        std::vector<std::string>{"10.1.0.5"});
}

TEST_CASE("a peer's GPU memory share: what it asked for, on the GPU it was given", "[peers]") {
  auto asking = [](const std::string& name, const std::string& ip, const std::string& gpu,
                   json annotations, const std::string& backend = "gvirtus-system/be-1",
                   const std::string& endpoint = "10.0.0.1:9999") {
    json pod = frontend(name, ip, backend, endpoint);
    pod["metadata"]["annotations"]["gvirtus.io/backend-gpu"] = gpu;
    pod["metadata"]["annotations"].update(annotations);
    return pod;
  };
  std::vector<PeerClaim> claims;
  for (const json& pod :
       {asking("big", "10.1.0.9", "1", {{"gpu-fraction", "0.5"}, {"gvirtus.io/gpu-memory", "1Gi"}}),
        asking("small", "10.1.0.10", "0", {{"gvirtus.io/gpu-memory", "512Mi"}}),
        asking("other", "10.1.0.11", "0", {{"gvirtus.io/gpu-memory", "8Gi"}}, "gvirtus-system/be-2",
               "10.0.0.2:9999"),
        frontend("whole", "10.1.0.12")}) {
    if (auto claim = peerClaim(pod)) {
      claims.push_back(*claim);
    }
  }
  REQUIRE(claims.size() == 4);
  CHECK_FALSE(claims[3].share.has_value());
  // The same address claimed twice (a stale claim beside a new one): the smaller share.
  PeerClaim again = claims[1];
  again.share->demand.gpuMemoryMiB = 256;
  claims.push_back(again);
  std::vector<gvirtus::GpuLoad> gpus(2);
  gpus[0].index = 0;
  gpus[0].memoryTotalMiB = 16384;
  gpus[1].index = 1;
  gpus[1].memoryTotalMiB = 81920;
  const auto shares = backendPeerShares("gvirtus-system/be-1", "10.0.0.1:9999", claims, gpus);
  // Half of GPU 1 (the larger of that and 1 GiB); the other backend's pod is not here.
  CHECK(shares == std::vector<PeerShare>{{"10.1.0.9", 40960}, {"10.1.0.10", 256}});
  CHECK(peerMemoryValue(shares) == "10.1.0.9=40960,10.1.0.10=256");
  CHECK(peerMemoryValue(shares, 1) == "10.1.0.9=40960");
  CHECK(peerMemoryValue({}).empty());
}
