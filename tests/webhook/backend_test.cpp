#include "webhook/backend.h"

#include <catch2/catch.hpp>

using namespace gvirtus::webhook;
using namespace std::chrono;

TEST_CASE("the backend shim's load annotation", "[backend]") {
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

TEST_CASE("a minimal load annotation", "[backend]") {
  auto load = parseBackendLoad(R"({"connections":0})");
  REQUIRE(load.has_value());
  CHECK(load->maxSessions == 0);
  CHECK(load->gpus.empty());
  CHECK_FALSE(load->updated.has_value());
}

TEST_CASE("bad load annotations are errors", "[backend]") {
  for (const char* text :
       {"", "[]", "{", R"({"connections":"3"})", R"({"connections":-1})", R"({"gpus":{}})",
        R"({"gpus":[1]})", R"({"gpus":[{"memoryTotalMiB":"x"}]})", R"({"updated":5})",
        R"({"updated":"yesterday"})"}) {
    INFO(text);
    CHECK_FALSE(parseBackendLoad(text).has_value());
  }
}

TEST_CASE("a backend's endpoint is IPv4:PORT", "[backend]") {
  Backend b;
  b.ip = "10.0.0.7";
  b.port = 9999;
  CHECK(b.endpoint() == "10.0.0.7:9999");
  CHECK(b.podRef().empty());
  b.podNamespace = "gvirtus-system";
  b.podName = "backend-0";
  CHECK(b.podRef() == "gvirtus-system/backend-0");
}

TEST_CASE("a backend without its pods keeps everything else", "[backend]") {
  Backend full;
  full.ip = "10.0.0.7";
  full.port = 9999;
  full.podNamespace = "gvirtus-system";
  full.podName = "backend-7";
  full.node = "gpu-7";
  full.zone = "zone-a";
  full.load = BackendLoad{};
  full.load->connections = 3;
  full.draining = true;
  full.shares = {GpuShare{}};
  full.assigned = {AssignedPod{std::chrono::system_clock::now(), "webhook-a", "team-a/app"}};
  Backend expected = full;
  expected.shares.clear();
  expected.assigned.clear();
  CHECK(full.withoutPods() == expected);
}
