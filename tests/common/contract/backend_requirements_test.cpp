#include "common/contract/backend_requirements.h"

#include <catch2/catch.hpp>

using namespace gvirtus;
using nlohmann::json;

namespace {
json podWithAnnotations(json annotations) {
  return {{"metadata", {{"name", "p"}, {"annotations", annotations}}}, {"spec", json::object()}};
}
}  // namespace

TEST_CASE("policies by name", "[requirements]") {
  CHECK(parsePolicy("least-connections").value() == Policy::LeastConnections);
  CHECK(parsePolicy("round-robin").value() == Policy::RoundRobin);
  CHECK(parsePolicy("random").value() == Policy::Random);
  CHECK(parsePolicy("same-zone").value() == Policy::SameZone);
  CHECK_FALSE(parsePolicy("fastest").has_value());
  for (auto p : {Policy::LeastConnections, Policy::RoundRobin, Policy::Random, Policy::SameZone}) {
    CHECK(parsePolicy(policyName(p)).value() == p);
  }
}

TEST_CASE("a pod's backend requirements", "[requirements]") {
  auto none = requirementsFromPod(podWithAnnotations(json::object()));
  REQUIRE(none.has_value());
  CHECK_FALSE(none->gpuMemoryMiB);
  CHECK_FALSE(none->gpus);
  CHECK_FALSE(none->policy);

  auto all = requirementsFromPod(podWithAnnotations({{"gvirtus.io/gpu-memory", "16Gi"},
                                                     {"gvirtus.io/gpus", " 2 "},
                                                     {"gvirtus.io/backend-policy", "random"}}));
  REQUIRE(all.has_value());
  CHECK(all->gpuMemoryMiB == 16384);
  CHECK(all->gpus == 2);
  CHECK(all->policy == Policy::Random);

  json pod = podWithAnnotations(json::object());
  pod["spec"]["nodeSelector"] = {{"topology.kubernetes.io/zone", "eu-1a"}};
  CHECK(requirementsFromPod(pod)->zone == "eu-1a");
}

TEST_CASE("a bad requirement names its annotation", "[requirements]") {
  for (auto [key, value] :
       {std::pair{"gvirtus.io/gpu-memory", "lots"}, std::pair{"gvirtus.io/gpu-memory", "-1Gi"},
        std::pair{"gvirtus.io/gpus", "two"}, std::pair{"gvirtus.io/gpus", "-1"},
        std::pair{"gvirtus.io/gpus", ""}, std::pair{"gvirtus.io/backend-policy", "fastest"},
        std::pair{"gpu-fraction", "0"}, std::pair{"gpu-fraction", "1.5"},
        std::pair{"gpu-fraction", "half"}, std::pair{"gpu-fraction", "nan"},
        std::pair{"gpu-memory", "2Gi"}, std::pair{"gpu-memory", "-5"}}) {
    INFO(key << "=" << value);
    auto r = requirementsFromPod(podWithAnnotations({{key, value}}));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message.find(key) != std::string::npos);
  }
}

TEST_CASE("KAI-Scheduler's GPU sharing annotations", "[requirements]") {
  auto fraction = requirementsFromPod(podWithAnnotations({{"gpu-fraction", " 0.5 "}}));
  REQUIRE(fraction.has_value());
  CHECK(fraction->gpuFraction == 0.5);
  CHECK_FALSE(fraction->kaiGpuMemoryMiB);
  CHECK(memoryDemandMiB(*fraction, 81920) == 40960);

  auto memory = requirementsFromPod(podWithAnnotations({{"gpu-memory", "2000"}}));
  REQUIRE(memory.has_value());
  CHECK(memory->kaiGpuMemoryMiB == 2000);
  CHECK(memoryDemandMiB(*memory, 81920) == 2000);

  auto whole = requirementsFromPod(podWithAnnotations({{"gpu-fraction", "1"}}));
  REQUIRE(whole.has_value());
  CHECK(memoryDemandMiB(*whole, 16384) == 16384);
}

TEST_CASE("the largest of a pod's GPU memory asks counts", "[requirements]") {
  // KAI gpu-memory, gvirtus.io/gpu-memory, and the fraction of the GPU's total.
  BackendRequirements mixed;
  mixed.gpuMemoryMiB = 1000;
  mixed.kaiGpuMemoryMiB = 3000;
  mixed.gpuFraction = 0.05;
  CHECK(memoryDemandMiB(mixed, 40960) == 3000);
  CHECK(memoryDemandMiB(mixed, 81920) == 4096);
  CHECK(memoryDemandMiB({}, 81920) == 0);
  CHECK_FALSE(asksForGpuMemory({}));
  CHECK(asksForGpuMemory(mixed));
}
