#include "common/contract/backend_load.h"

#include <catch2/catch.hpp>

using namespace gvirtus;
using namespace std::chrono;

TEST_CASE("the backend shim's load annotation", "[backend-load]") {
  auto load = parseBackendLoad(
      R"({"connections":3,"maxSessions":16,"gpus":[{"index":0,"memoryTotalMiB":81920,"memoryUsedMiB":1024,"utilization":12},{"index":1,"memoryTotalMiB":40960,"memoryUsedMiB":0,"utilization":0}],"updated":"2026-11-22T10:00:00Z","extra":true})");
  REQUIRE(load.has_value());
  CHECK(load->connections == 3);
  CHECK(load->maxSessions == 16);
  REQUIRE(load->gpus.size() == 2);
  CHECK(load->gpus[0].memoryFreeMiB() == 80896);
  CHECK(load->gpus[1].index == 1);
  REQUIRE(load->updated.has_value());
  CHECK(*load->updated == sys_days(year(2026) / 11 / 22) + hours(10));
}

TEST_CASE("a minimal load annotation", "[backend-load]") {
  auto load = parseBackendLoad(R"({"connections":0})");
  REQUIRE(load.has_value());
  CHECK(load->maxSessions == 0);
  CHECK(load->gpus.empty());
  CHECK_FALSE(load->updated.has_value());
}

TEST_CASE("bad load annotations are errors", "[backend-load]") {
  for (
      const char* text :
      {"", "[]", "{", R"({"connections":"3"})", R"({"connections":-1})", R"({"gpus":{}})",
       R"({"gpus":[1]})", R"({"gpus":[{"memoryTotalMiB":"x"}]})", R"({"updated":5})",
       R"({"updated":"yesterday"})", R"({"gpus":[{"uuid":7}]})",
       R"({"gpus":[{"model":"0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456"}]})"}) {
    INFO(text);
    CHECK_FALSE(parseBackendLoad(text).has_value());
  }
}

TEST_CASE("the shim's rendering reads back as what it wrote", "[backend-load]") {
  BackendLoad load{.connections = 3,
                   .maxSessions = 16,
                   .gpus = {GpuLoad{0, 81920, 1024, 12, {}, {}}, GpuLoad{1, 40960, 0, 0, {}, {}}},
                   .updated = sys_days(year(2026) / 11 / 22) + hours(10)};
  const std::string text = renderBackendLoad(load);
  CHECK(text == R"({"connections":3,"maxSessions":16,"gpus":[{"index":0,"memoryTotalMiB":81920,)"
                R"("memoryUsedMiB":1024,"utilization":12},{"index":1,"memoryTotalMiB":40960,)"
                R"("memoryUsedMiB":0,"utilization":0}],"updated":"2026-11-22T10:00:00Z"})");
  CHECK(parseBackendLoad(text) == load);
  load.updated.reset();
  CHECK(renderBackendLoad(load).find("updated") == std::string::npos);
  CHECK(parseBackendLoad(renderBackendLoad(load)) == load);

  // What NVML names the GPU, where it does.
  load.gpus[1].uuid = "GPU-11111111-1111-1111-1111-111111111111";
  load.gpus[1].model = "NVIDIA H100 80GB HBM3";
  const std::string named = renderBackendLoad(load);
  CHECK(named.find(R"("utilization":0,"uuid":"GPU-11111111-1111-1111-1111-111111111111",)"
                   R"("model":"NVIDIA H100 80GB HBM3"})") != std::string::npos);
  CHECK(named.find("uuid") == named.rfind("uuid"));
  CHECK(parseBackendLoad(named) == load);
}
