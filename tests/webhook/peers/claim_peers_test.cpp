#include "webhook/peers/claim_peers.h"

#include <catch2/catch.hpp>

using namespace gvirtus::webhook;
using nlohmann::json;

namespace {

json claim(json results, json reservedFor) {
  return {{"metadata", {{"name", "c"}, {"namespace", "team"}, {"uid", "cu"}}},
          {"spec", {{"devices", {{"requests", json::array()}}}}},
          {"status",
           {{"allocation", {{"devices", {{"results", std::move(results)}}}}},
            {"reservedFor", std::move(reservedFor)}}}};
}

json result(const std::string& driver, const std::string& pool) {
  return {{"driver", driver}, {"request", "gpu"}, {"pool", pool}, {"device", "gpu-0"}};
}

json pod(const std::string& name, const std::string& uid) {
  return {{"resource", "pods"}, {"name", name}, {"uid", uid}};
}

}  // namespace

TEST_CASE("a claim grants the pods reserved for it the backend pods its pools name",
          "[claim-peers]") {
  const json c =
      claim({result("gpu.gvirtus.io", "gvirtus-system/be-1"),
             result("other.example.com", "gvirtus-system/be-2"),
             result("gpu.gvirtus.io", "gvirtus-system/be-1"),
             result("gpu.gvirtus.io", "gvirtus-system/be-3")},
            {pod("app-1", "u1"),
             pod("app-2", "u2"),
             {{"apiGroup", "apps"}, {"resource", "deployments"}, {"name", "d"}, {"uid", "u3"}},
             pod("", "u4")});
  const ClaimPeers peers = claimPeers(c);
  CHECK(peers.backendPods ==
        std::vector<std::string>{"gvirtus-system/be-1", "gvirtus-system/be-3"});
  CHECK(peers.reservedFor == std::vector<ClaimReservation>{{"app-1", "u1"}, {"app-2", "u2"}});
  CHECK(isGvirtusClaim(c));
  CHECK(claimPeers(compactClaim(c)) == peers);
}

TEST_CASE("a claim of another driver, not allocated, or with a pool naming no pod grants nothing",
          "[claim-peers]") {
  const json other = claim({result("other.example.com", "ns/be")}, {pod("app", "u")});
  CHECK_FALSE(isGvirtusClaim(other));
  CHECK(claimPeers(other) == ClaimPeers{});
  json waiting = other;
  waiting.erase("status");
  CHECK_FALSE(isGvirtusClaim(waiting));
  CHECK(claimPeers(waiting) == ClaimPeers{});
  for (const char* pool : {"gvirtus-abcdef0123", "/be", "ns/", "a/b/c"}) {
    CHECK(
        claimPeers(claim({result("gpu.gvirtus.io", pool)}, {pod("app", "u")})).backendPods.empty());
  }
}

TEST_CASE("the caches keep only what the peers need", "[claim-peers]") {
  json c = claim({result("gpu.gvirtus.io", "ns/be")}, {pod("app", "u")});
  c["metadata"]["managedFields"] = json::array({{{"manager", "kube-scheduler"}}});
  const json compact = compactClaim(c);
  CHECK_FALSE(compact.contains("spec"));
  CHECK_FALSE(compact["metadata"].contains("managedFields"));
  CHECK(compact["metadata"]["uid"] == "cu");

  const json p = {
      {"metadata", {{"name", "app"}, {"namespace", "team"}, {"uid", "u"}}},
      {"spec",
       {{"resourceClaims", json::array({{{"name", "gpu"}, {"resourceClaimTemplateName", "t"}}})},
        {"containers", json::array({{{"name", "c"}}})}}},
      {"status",
       {{"phase", "Running"},
        {"podIP", "10.1.0.5"},
        {"hostIP", "10.0.0.9"},
        {"resourceClaimStatuses",
         json::array({{{"name", "gpu"}, {"resourceClaimName", "app-gpu-x7k2"}}})}}}};
  CHECK(usesClaims(p));
  CHECK_FALSE(usesClaims(json{{"spec", {{"containers", json::array()}}}}));
  const json claimant = compactClaimant(p);
  CHECK(claimant == json{{"metadata", {{"name", "app"}, {"namespace", "team"}, {"uid", "u"}}},
                         {"spec", {{"resourceClaims", json::array()}}},
                         {"status",
                          {{"phase", "Running"},
                           {"podIP", "10.1.0.5"},
                           {"resourceClaimStatuses",
                            json::array({{{"resourceClaimName", "app-gpu-x7k2"}}})}}}});
  CHECK(claimantUses(claimant, "app-gpu-x7k2"));
}

TEST_CASE("a reservation lets in only a pod that names the claim, off its node's network",
          "[claim-peers]") {
  const json byName = {
      {"spec", {{"resourceClaims", json::array({{{"name", "gpu"}, {"resourceClaimName", "c"}}})}}}};
  CHECK(claimantUses(byName, "c"));
  CHECK_FALSE(claimantUses(byName, "other"));
  CHECK_FALSE(claimantUses(byName, ""));
  CHECK_FALSE(claimantUses(json{{"spec", {{"resourceClaims", json::array()}}}}, "c"));
  json onHost = byName;
  onHost["spec"]["hostNetwork"] = true;
  CHECK_FALSE(claimantUses(onHost, "c"));
}

TEST_CASE("the claim kube-scheduler made for a pod's extended resource counts as one it names",
          "[claim-peers]") {
  // Only kube-scheduler writes status.extendedResourceClaimStatus (a pod's author cannot set
  // status), as it writes the claim's reservation.
  const json p = {
      {"metadata", {{"name", "app"}, {"namespace", "team"}, {"uid", "u"}}},
      {"spec", {{"containers", json::array({{{"name", "c"}}})}}},
      {"status",
       {{"phase", "Running"},
        {"podIP", "10.1.0.5"},
        {"extendedResourceClaimStatus",
         {{"resourceClaimName", "app-extended-resources-q8x4w"},
          {"requestMappings", json::array({{{"containerName", "c"},
                                            {"resourceName", "gvirtus.io/gpu"},
                                            {"requestName", "container-0-request-0"}}})}}}}}};
  CHECK(usesClaims(p));
  CHECK(claimNames(p) == std::vector<std::string>{"app-extended-resources-q8x4w"});
  const json claimant = compactClaimant(p);
  CHECK_FALSE(claimant["status"]["extendedResourceClaimStatus"].contains("requestMappings"));
  CHECK(claimantUses(claimant, "app-extended-resources-q8x4w"));
  CHECK(holdsReservation(claimant, {"app", "u"}, "app-extended-resources-q8x4w"));
  CHECK_FALSE(holdsReservation(claimant, {"app", "u"}, "another-claim"));
}
