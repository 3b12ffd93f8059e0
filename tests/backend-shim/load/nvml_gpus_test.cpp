#include "backend-shim/load/nvml_gpus.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

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
  CHECK((*gpus)[0] == GpuInfo{0, 80ull << 30, 1ull << 30, 12,
                              "GPU-00000000-0000-0000-0000-000000000000", "Fake GPU 80GB"});
  CHECK((*gpus)[1] ==
        GpuInfo{1, 40ull << 30, 0, 0, "GPU-11111111-1111-1111-1111-111111111111", "Fake GPU 40GB"});
}

TEST_CASE("backend-shim nvml_gpus: a library under NVML's own file name is loaded like it",
          "[nvml_gpus]") {
  // The stand-in, installed as libnvidia-ml.so.1 in a folder of its own: what the shim
  // finds on a GPU node where the driver mounted NVML.
  const auto dir =
      std::filesystem::temp_directory_path() / ("gvirtus-nvml-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto library = dir / "libnvidia-ml.so.1";
  std::filesystem::remove(library);
  std::filesystem::create_symlink(FAKE_NVML_LIBRARY, library);
  auto nvml = NvmlGpus::open(library.string());
  REQUIRE(nvml->available());
  auto gpus = nvml->read();
  REQUIRE(gpus.has_value());
  REQUIRE_FALSE(gpus->empty());
  for (const auto& gpu : *gpus) {
    CHECK(gpu.memoryTotalBytes > 0);
    CHECK(gpu.memoryUsedBytes <= gpu.memoryTotalBytes);
    CHECK(gpu.utilizationPercent <= 100);
  }
  std::filesystem::remove_all(dir);
}
