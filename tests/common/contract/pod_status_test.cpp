// What every component reads of a pod's status (common/contract/pod_status.h).
#include "common/contract/pod_status.h"

#include <catch2/catch.hpp>

#include "common/time/time_text.h"

using gvirtus::podCondition;
using gvirtus::podIpv4;
using gvirtus::podReady;
using gvirtus::podReadySince;
using nlohmann::json;

namespace {

json podWith(json status) {
  return {{"metadata", {{"name", "p"}}}, {"status", std::move(status)}};
}

}  // namespace

TEST_CASE("a pod is Ready only with condition Ready True, since its last transition",
          "[pod-status]") {
  CHECK_FALSE(podReady(podWith(json::object())));
  CHECK_FALSE(podReadySince(podWith(json::object())));
  const json ready =
      podWith({{"conditions", json::array({{{"type", "PodScheduled"}, {"status", "True"}},
                                           {{"type", "Ready"},
                                            {"status", "True"},
                                            {"lastTransitionTime", "2026-11-26T10:00:00Z"}}})}});
  CHECK(podReady(ready));
  CHECK(podReadySince(ready) == *gvirtus::parseRfc3339("2026-11-26T10:00:00Z"));
  REQUIRE(podCondition(ready, "PodScheduled") != nullptr);
  CHECK(podCondition(ready, "gvirtus.io/BackendLost") == nullptr);
  json notReady = ready;
  notReady["status"]["conditions"][1]["status"] = "False";
  CHECK_FALSE(podReady(notReady));
}

TEST_CASE("a pod's IPv4 address, on a dual-stack cluster too", "[pod-status]") {
  CHECK(podIpv4(podWith({{"podIP", "10.244.1.5"}})) == "10.244.1.5");
  CHECK(podIpv4(podWith(json::object())).empty());
  // IPv6 first: the IPv4 address is the second of podIPs.
  CHECK(
      podIpv4(podWith({{"podIP", "fd00::5"},
                       {"podIPs", json::array({{{"ip", "fd00::5"}}, {{"ip", "10.244.1.5"}}})}})) ==
      "10.244.1.5");
  CHECK(podIpv4(podWith({{"podIP", "fd00::5"}})).empty());
}
