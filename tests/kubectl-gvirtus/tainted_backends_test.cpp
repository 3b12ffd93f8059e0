// Lost backends whose devices the webhook's leader tainted, from DeviceTaintRules written as
// the backend follower makes them and kube-controller-manager's eviction controller
// updates them (webhook/dra/device_taint_rule.h).
#include "kubectl-gvirtus/tainted_backends.h"

#include <catch2/catch.hpp>

#include "kubectl-gvirtus/report.h"

namespace {

using namespace gvirtus::kubectl_gvirtus;
using nlohmann::json;

// 2026-11-22T10:00:00Z
const TimePoint kNow = std::chrono::system_clock::from_time_t(1795341600);

json rule(const std::string& backendPod, const std::string& added, const std::string& driver) {
  std::string name = "gvirtus-lost-" + backendPod;
  name[name.find('/')] = '-';
  return {{"metadata",
           {{"name", name},
            {"labels", {{"app.kubernetes.io/managed-by", "gvirtus-webhook"}}},
            {"annotations", {{"gvirtus.io/backend-pod", backendPod}}}}},
          {"spec",
           {{"deviceSelector", {{"driver", driver}, {"pool", backendPod}}},
            {"taint",
             {{"key", "gpu.gvirtus.io/backend-lost"},
              {"value", "gone"},
              {"effect", "NoExecute"},
              {"timeAdded", added}}}}}};
}

}  // namespace

TEST_CASE("status lists the lost backends whose devices are tainted, oldest first",
          "[kubectl-gvirtus][tainted]") {
  json late = rule("gvirtus-system/backend-b", "2026-11-22T09:59:30Z", "gpu.gvirtus.io");
  late["status"]["conditions"] = json::array({{{"type", "EvictionInProgress"},
                                               {"status", "True"},
                                               {"reason", "PodsPendingEviction"},
                                               {"message", "2 pods are pending eviction"}}});
  const std::vector<json> rules{
      late, rule("gvirtus-system/backend-a", "2026-11-22T09:55:00Z", "gpu.gvirtus.io"),
      // Not ours: another driver's devices.
      rule("gvirtus-system/backend-c", "2026-11-22T09:00:00Z", "gpu.example.com")};
  const auto tainted = taintedViews(rules, kNow);
  REQUIRE(tainted.size() == 2);
  CHECK(tainted[0].backendPod == "gvirtus-system/backend-a");
  CHECK(tainted[0].age == std::chrono::seconds(300));
  CHECK(tainted[0].eviction == "-");
  CHECK(tainted[1].rule == "gvirtus-lost-gvirtus-system-backend-b");
  CHECK(tainted[1].taint == "gpu.gvirtus.io/backend-lost=gone:NoExecute");
  CHECK(tainted[1].eviction == "PodsPendingEviction: 2 pods are pending eviction");

  const std::string status = statusText({}, {}, {}, tainted, kNow);
  CHECK_THAT(status, Catch::Contains("Lost backends whose devices are tainted"));
  CHECK_THAT(status, Catch::Contains("gvirtus-lost-gvirtus-system-backend-b"));
  CHECK(toJson(tainted[0])["ageSeconds"] == 300);
  CHECK_THAT(statusText({}, {}, {}, {}, kNow), !Catch::Contains("tainted"));
}
