#include "device-plugin/plugin/allocation.h"

#include <catch2/catch.hpp>

using namespace gvirtus::device_plugin;

namespace {

const std::vector<std::string> kKnown{"vgpu-0", "vgpu-1", "vgpu-2", "vgpu-3"};

std::string errorOf(const gvirtus::Result<ContainerAllocation>& result) {
  REQUIRE_FALSE(result.has_value());
  return result.error().message;
}

std::string errorOf(const gvirtus::Result<std::vector<std::string>>& result) {
  REQUIRE_FALSE(result.has_value());
  return result.error().message;
}

}  // namespace

TEST_CASE("a container gets its IDs in the env and as CDI devices", "[device-plugin][allocate]") {
  auto allocation = allocateContainer(kKnown, {"vgpu-3", "vgpu-1"}, true);
  REQUIRE(allocation.has_value());
  CHECK(allocation->env ==
        std::map<std::string, std::string>{{"GVIRTUS_VGPU_IDS", "vgpu-3,vgpu-1"}});
  CHECK(allocation->cdiDevices ==
        std::vector<std::string>{"gvirtus.io/vgpu=vgpu-3", "gvirtus.io/vgpu=vgpu-1"});
}

TEST_CASE("without CDI a container gets the env only", "[device-plugin][allocate]") {
  auto allocation = allocateContainer(kKnown, kKnown, false);
  REQUIRE(allocation.has_value());
  CHECK(allocation->env.at("GVIRTUS_VGPU_IDS") == "vgpu-0,vgpu-1,vgpu-2,vgpu-3");
  CHECK(allocation->cdiDevices.empty());
}

TEST_CASE("invalid allocations say what is wrong", "[device-plugin][allocate]") {
  CHECK(errorOf(allocateContainer(kKnown, {}, true)) == "no device requested");
  CHECK(errorOf(allocateContainer(kKnown, {"vgpu-0", "gpu-7"}, true)) ==
        "unknown device \"gpu-7\" (this node has vgpu-0 .. vgpu-3)");
  CHECK(errorOf(allocateContainer(kKnown, {"vgpu-1", "vgpu-1"}, true)) ==
        "device \"vgpu-1\" requested twice");
  CHECK(errorOf(allocateContainer(kKnown, {"vgpu-0", "vgpu-1", "vgpu-2", "vgpu-3", "vgpu-4"},
                                  true)) == "5 devices requested but this node has only 4");
}

TEST_CASE("preferred allocations take the must-include devices, then the lowest indexes",
          "[device-plugin][allocate]") {
  using Ids = std::vector<std::string>;
  CHECK(preferredAllocation(kKnown, {"vgpu-3", "vgpu-0", "vgpu-2"}, {"vgpu-2"}, 2).value() ==
        Ids{"vgpu-2", "vgpu-0"});
  CHECK(preferredAllocation(kKnown, {"vgpu-3", "vgpu-1"}, {}, 1).value() == Ids{"vgpu-1"});
  CHECK(preferredAllocation(kKnown, kKnown, {"vgpu-3", "vgpu-1"}, 2).value() ==
        Ids{"vgpu-3", "vgpu-1"});
  CHECK(preferredAllocation(kKnown, {"vgpu-2", "vgpu-2", "vgpu-0"}, {}, 2).value() ==
        Ids{"vgpu-0", "vgpu-2"});
}

TEST_CASE("invalid preferred allocation requests say what is wrong", "[device-plugin][allocate]") {
  CHECK(errorOf(preferredAllocation(kKnown, {"vgpu-0"}, {}, 0)) ==
        "allocation size must be at least 1, got 0");
  CHECK(errorOf(preferredAllocation(kKnown, {"vgpu-0"}, {}, 2)) ==
        "allocation size 2 exceeds the 1 available devices");
  CHECK_THAT(errorOf(preferredAllocation(kKnown, {"vgpu-0", "gpu-9"}, {}, 1)),
             Catch::Contains("unknown device \"gpu-9\""));
  CHECK(errorOf(preferredAllocation(kKnown, kKnown, {"vgpu-0", "vgpu-1"}, 1)) ==
        "2 must-include devices exceed the allocation size 1");
  CHECK(errorOf(preferredAllocation(kKnown, {"vgpu-0", "vgpu-1"}, {"vgpu-2"}, 1)) ==
        "must-include device \"vgpu-2\" is not available");
  CHECK(errorOf(preferredAllocation(kKnown, kKnown, {"vgpu-2", "vgpu-2"}, 2)) ==
        "must-include device \"vgpu-2\" listed twice");
}
