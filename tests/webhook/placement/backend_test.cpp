#include "webhook/placement/backend.h"

#include <catch2/catch.hpp>

using namespace gvirtus::webhook;
using gvirtus::BackendLoad;
using gvirtus::GpuLoad;
using gvirtus::GpuShare;
using namespace std::chrono;

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
