// The GPU share a GVirtuS pod holds on its backend (common/contract/gpu_share.h).
#include "common/contract/gpu_share.h"

#include <catch2/catch.hpp>

using gvirtus::heldShare;
using nlohmann::json;

TEST_CASE("a GVirtuS pod holds a GPU share while it runs with its backend GPU", "[gpu-share]") {
  json pod = {{"metadata",
               {{"name", "half-1"},
                {"namespace", "team-a"},
                {"annotations",
                 {{"gpu-fraction", "0.5"},
                  {"gvirtus.io/backend", "10.244.1.5:9999"},
                  {"gvirtus.io/backend-gpu", "0"}}}}},
              {"status", {{"phase", "Running"}}}};
  auto held = heldShare(pod);
  REQUIRE(held.has_value());
  CHECK(held->first == "10.244.1.5:9999");
  CHECK(held->second.pod == "team-a/half-1");
  CHECK(held->second.gpuIndex == 0);
  CHECK(held->second.demand.gpuFraction == 0.5);

  json finished = pod;
  finished["status"]["phase"] = "Succeeded";
  CHECK_FALSE(heldShare(finished).has_value());
  json noGpu = pod;
  noGpu["metadata"]["annotations"].erase("gvirtus.io/backend-gpu");
  CHECK_FALSE(heldShare(noGpu).has_value());
  json badGpu = pod;
  badGpu["metadata"]["annotations"]["gvirtus.io/backend-gpu"] = "-1";
  CHECK_FALSE(heldShare(badGpu).has_value());
  json noMemory = pod;
  noMemory["metadata"]["annotations"].erase("gpu-fraction");
  CHECK_FALSE(heldShare(noMemory).has_value());
  json waiting = pod;
  waiting["metadata"]["annotations"].erase("gvirtus.io/backend");
  CHECK_FALSE(heldShare(waiting).has_value());
}
