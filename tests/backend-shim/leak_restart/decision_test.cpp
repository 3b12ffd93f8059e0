#include "backend-shim/leak_restart/decision.h"

#include <catch2/catch.hpp>

using namespace gvirtus::backend_shim;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

json pod(const std::string& name, const std::string& ready, const std::string& ip = "10.0.0.9") {
  json out = {{"metadata", {{"name", name}}},
              {"status",
               {{"conditions", json::array({{{"type", "PodScheduled"}, {"status", "True"}},
                                            {{"type", "Ready"}, {"status", ready}}})}}}};
  if (!ip.empty()) {
    out["status"]["podIP"] = ip;
  }
  return out;
}

const gvirtus::Duration kMaxDefer = 5min;

}  // namespace

TEST_CASE("backend-shim leak_restart_decision: a backend pod is ready as the webhook sees it",
          "[leak_restart]") {
  CHECK(backendPodFrom(pod("a", "True")).ready);
  CHECK(backendPodFrom(pod("a", "True")).name == "a");
  CHECK_FALSE(backendPodFrom(pod("a", "False")).ready);
  CHECK_FALSE(backendPodFrom(pod("a", "True", "")).ready);  // no IP yet
  json terminating = pod("a", "True");
  terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  CHECK_FALSE(backendPodFrom(terminating).ready);
  CHECK_FALSE(backendPodFrom(json{{"metadata", {{"name", "a"}}}}).ready);  // no status
  CHECK_FALSE(backendPodFrom(json::array()).ready);
}

TEST_CASE("backend-shim leak_restart_decision: restart only while another backend is Ready",
          "[leak_restart]") {
  using Pods = std::vector<BackendPod>;
  // Alone, or with the others not ready: it waits.
  auto decision = decideLeakRestart(Pods{{"self", true}}, "self", 0s, kMaxDefer);
  CHECK_FALSE(decision.restart);
  CHECK_THAT(decision.reason, Catch::Contains("no other backend pod is ready"));
  CHECK_FALSE(
      decideLeakRestart(Pods{{"self", true}, {"b", false}}, "self", 1min, kMaxDefer).restart);
  CHECK_FALSE(decideLeakRestart(Pods{}, "self", 1min, kMaxDefer).restart);
  // Another is Ready: it may go, and the reason names it.
  decision =
      decideLeakRestart(Pods{{"self", false}, {"b", false}, {"c", true}}, "self", 0s, kMaxDefer);
  CHECK(decision.restart);
  CHECK(decision.reason == "1 other backend pod(s) ready: c");
  decision =
      decideLeakRestart(Pods{{"b", true}, {"c", true}, {"d", true}, {"e", true}, {"self", true}},
                        "self", 0s, kMaxDefer);
  CHECK(decision.reason == "4 other backend pod(s) ready: b,c,d,...");
}

TEST_CASE("backend-shim leak_restart_decision: an unreadable list waits, the bound ends waits",
          "[leak_restart]") {
  const gvirtus::Result<std::vector<BackendPod>> unreadable = gvirtus::fail("connection refused");
  auto decision = decideLeakRestart(unreadable, "self", 4min, kMaxDefer);
  CHECK_FALSE(decision.restart);
  CHECK_THAT(decision.reason, Catch::Contains("connection refused"));
  // At --leak-restart-max-defer it goes, read or not, alone or not.
  decision = decideLeakRestart(unreadable, "self", 5min, kMaxDefer);
  CHECK(decision.restart);
  CHECK_THAT(decision.reason, Catch::Contains("--leak-restart-max-defer"));
  CHECK(
      decideLeakRestart(std::vector<BackendPod>{{"self", true}}, "self", 6min, kMaxDefer).restart);
}

TEST_CASE("backend-shim leak_restart_decision: this pod seen not Ready", "[leak_restart]") {
  const std::vector<BackendPod> pods{{"self", false}, {"b", true}};
  CHECK(seenNotReady(pods, "self"));
  CHECK_FALSE(seenNotReady(pods, "b"));
  CHECK_FALSE(seenNotReady(pods, "missing"));  // not listed: not known to be seen
}
