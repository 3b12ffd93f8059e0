#include "backend-shim/nvml_gpus.h"

#include <catch2/catch.hpp>

using gvirtus::backend_shim::GpuInfo;
using gvirtus::backend_shim::NvmlGpus;

TEST_CASE("backend-shim nvml_gpus: absent NVML means no GPUs, not an error", "[nvml_gpus]") {
  auto nvml = NvmlGpus::open("libnvidia-ml-that-is-not-here.so.1");
  REQUIRE(nvml != nullptr);
  CHECK_FALSE(nvml->available());
  auto gpus = nvml->read();
  REQUIRE(gpus.has_value());
  CHECK(gpus->empty());
}

TEST_CASE("backend-shim nvml_gpus: reads every GPU through the loaded library", "[nvml_gpus]") {
  auto nvml = NvmlGpus::open(FAKE_NVML_LIBRARY);
  REQUIRE(nvml->available());
  auto gpus = nvml->read();
  REQUIRE(gpus.has_value());
  REQUIRE(gpus->size() == 2);
  CHECK((*gpus)[0] == GpuInfo{0, 80ull << 30, 1ull << 30, 12});
  CHECK((*gpus)[1] == GpuInfo{1, 40ull << 30, 0, 0});
}

TEST_CASE("backend-shim nvml_gpus: the real NVML, when this machine has one", "[nvml_gpus]") {
  auto nvml = NvmlGpus::open();
  if (!nvml->available()) {
    SUCCEED("no libnvidia-ml.so.1 here");
    return;
  }
  auto gpus = nvml->read();
  REQUIRE(gpus.has_value());
  for (const auto& gpu : *gpus) {
    CHECK(gpu.memoryTotalBytes > 0);
    CHECK(gpu.memoryUsedBytes <= gpu.memoryTotalBytes);
    CHECK(gpu.utilizationPercent <= 100);
  }
}
