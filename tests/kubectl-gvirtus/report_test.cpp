#include "kubectl-gvirtus/report.h"

#include <catch2/catch.hpp>

namespace {

using namespace gvirtus::kubectl_gvirtus;

TEST_CASE("tables pad columns to the widest cell", "[report]") {
  CHECK(formatTable({{"A", "BB"}, {"long", "x"}}) == "A      BB\nlong   x\n");
}

TEST_CASE("status: a summary line, the backends and the waiting pods", "[report]") {
  BackendView b;
  b.ns = "gvirtus-system";
  b.name = "gvirtus-backend-a";
  b.node = "gpu-1";
  b.endpoint = "10.0.0.5:9999";
  b.ready = true;
  b.load = gvirtus::BackendLoad{3, 16, {{0, 81920, 1024, 12, {}, {}}}, std::nullopt};
  b.loadAge = std::chrono::seconds(12);
  b.pods = 3;
  b.heldMiB = 40960;
  WaitingView w{"team-a", "train", std::chrono::minutes(5), "no GVirtuS backend is ready",
                std::chrono::minutes(4)};
  const std::string text = statusText({b}, {w}, {}, {}, std::chrono::system_clock::now());
  CHECK_THAT(text, Catch::StartsWith("Backends: 1 ready of 1, sessions 3/16; pods waiting: 1; "
                                     "pods with a lost backend: 0\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus-backend-a   gpu-1   10.0.0.5:9999   yes     3/16       "
                                   "3      1      1.0/80.0Gi   40.0Gi     12%        12s"));
  CHECK_THAT(text, Catch::Contains("team-a      train   5m        4m ago        no GVirtuS backend "
                                   "is ready"));

  auto j = toJson(b);
  CHECK(j["load"]["connections"] == 3);
  CHECK(j["load"]["gpus"][0]["memoryTotalMiB"] == 81920);
  CHECK(j["pods"] == 3);
  CHECK(j["gpuMemoryHeldMiB"] == 40960);
  CHECK(toJson(w)["waitingSeconds"] == 300);
  CHECK(toJson(w)["reasonAgeSeconds"] == 240);
}

TEST_CASE("empty clusters say so", "[report]") {
  CHECK(backendsTable({}) == "No GVirtuS backends.\n");
  CHECK(waitingTable({}) == "No pods wait for a backend.\n");
}

}  // namespace
