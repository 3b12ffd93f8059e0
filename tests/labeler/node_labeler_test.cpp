#include "labeler/node_labeler.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "common/contract/labels.h"
#include "support/cluster_env.h"
#include "support/fake_object_cache.h"
#include "support/manual_clock.h"

// The labeler's controller without HTTP: its node cache is a FakeObjectCache and its
// writes go to an in-memory API that applies merge patches and refuses a stale
// resourceVersion, as the API server does. The real API server runs in
// labeler_integration_test.cpp.

using gvirtus::fail;
using gvirtus::MetricsRegistry;
using gvirtus::Result;
using gvirtus::labeler::NodeApi;
using gvirtus::labeler::NodeLabeler;
using gvirtus::labeler::Options;
using gvirtus::testing::eventually;
using gvirtus::testing::FakeObjectCache;
using gvirtus::testing::ManualClock;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

json node(const std::string& name, const std::string& rv, json labels = json::object()) {
  return {{"metadata", {{"name", name}, {"resourceVersion", rv}, {"labels", labels}}}};
}

// Nodes by name; a patch carrying another resourceVersion than the stored one is a 409.
struct MemoryApi {
  std::mutex mutex;
  std::map<std::string, json> nodes;
  std::vector<json> patches;
  int refuseNext = 0;  // answer this many patches with 500

  void store(const json& n) {
    std::lock_guard lock(mutex);
    nodes[n["metadata"]["name"].get<std::string>()] = n;
  }
  size_t patchCount() {
    std::lock_guard lock(mutex);
    return patches.size();
  }
  json patchAt(size_t i) {
    std::lock_guard lock(mutex);
    return patches.at(i);
  }

  NodeApi api() {
    return {.get = [this](const std::string& name) -> Result<json> {
              std::lock_guard lock(mutex);
              auto it = nodes.find(name);
              if (it == nodes.end()) {
                return fail("nodes \"" + name + "\" not found", 404);
              }
              return it->second;
            },
            .patch = [this](const std::string& name, const std::string& text) -> Result<json> {
              std::lock_guard lock(mutex);
              if (refuseNext > 0) {
                --refuseNext;
                return fail("the API server is unavailable", 500);
              }
              auto patch = json::parse(text);
              json& stored = nodes.at(name);
              if (patch["metadata"].value("resourceVersion", "") !=
                  stored["metadata"]["resourceVersion"]) {
                return fail("the object has been modified", 409, "Conflict");
              }
              patches.push_back(patch);
              stored.merge_patch(patch);
              stored["metadata"]["resourceVersion"] = std::to_string(
                  std::stoi(stored["metadata"]["resourceVersion"].get<std::string>()) + 1);
              return stored;
            }};
  }
};

Options options(const std::string& nodeName) {
  Options o;
  o.nodeName = nodeName;
  o.gpuProbePaths = {(std::filesystem::temp_directory_path() / "gvirtus-no-such-gpu").string()};
  return o;
}

}  // namespace

TEST_CASE("labeler sync: one patch for a bare node, none again from a stale cache",
          "[labeler][controller]") {
  MemoryApi api;
  api.store(node("n1", "7"));
  FakeObjectCache nodes;
  nodes.put(node("n1", "7"));
  MetricsRegistry metrics;
  NodeLabeler labeler(api.api(), options("n1"), metrics);

  REQUIRE(labeler.sync("n1", nodes));
  REQUIRE(api.patchCount() == 1);
  CHECK(api.patchAt(0)["metadata"]["labels"] == json{{gvirtus::names::kFrontendAllowed, "true"},
                                                     {gvirtus::names::kBackendAllowed, "false"},
                                                     {gvirtus::names::kGpuPresent, "false"}});
  CHECK(labeler.ready());

  // The cache has not seen our write yet: the patch result stands in for it.
  REQUIRE(labeler.sync("n1", nodes));
  CHECK(api.patchCount() == 1);

  // The watch brings our write: still nothing to do.
  nodes.put(api.api().get("n1").value());
  REQUIRE(labeler.sync("n1", nodes));
  CHECK(api.patchCount() == 1);
}

TEST_CASE("labeler sync: a node not in the cache is no error and no write",
          "[labeler][controller]") {
  MemoryApi api;
  FakeObjectCache nodes;
  MetricsRegistry metrics;
  NodeLabeler labeler(api.api(), options("n1"), metrics);
  CHECK(labeler.sync("n1", nodes));
  CHECK(api.patchCount() == 0);
  CHECK_FALSE(labeler.ready());
}

TEST_CASE(
    "labeler sync: an operator's change since the cache's copy is a conflict, not an "
    "overwrite",
    "[labeler][controller]") {
  MemoryApi api;
  api.store(node("n1", "8", {{gvirtus::names::kFrontendAllowed, "false"}}));  // the operator's edit
  FakeObjectCache nodes;
  nodes.put(node("n1", "7"));  // the cache is behind
  MetricsRegistry metrics;
  NodeLabeler labeler(api.api(), options("n1"), metrics);
  auto synced = labeler.sync("n1", nodes);
  REQUIRE_FALSE(synced);
  CHECK(synced.error().isConflict());
  CHECK(api.patchCount() == 0);
  CHECK(metrics.counter("gvirtus_labeler_conflicts_total", "").value() == 1);
}

TEST_CASE("labeler run: cache events, retries with backoff, readiness and the GPU probe",
          "[labeler][controller]") {
  const auto gpuDir = std::filesystem::temp_directory_path() /
                      ("gvirtus-labeler-gpu-" + std::to_string(::getpid()));
  std::filesystem::remove_all(gpuDir);
  MemoryApi api;
  api.refuseNext = 1;  // the first patch fails: it must come back by itself
  api.store(node("n1", "1"));
  FakeObjectCache nodes;
  MetricsRegistry metrics;
  ManualClock clock;  // paces the GPU probe only
  auto o = options("n1");
  o.gpuProbePaths = {gpuDir.string()};
  o.gpuProbeInterval = 30s;
  NodeLabeler labeler(api.api(), o, metrics, &clock);

  std::jthread loop([&](std::stop_token stop) { labeler.run(stop, nodes); });
  REQUIRE(eventually([&] { return nodes.started(); }, 5s));
  CHECK_FALSE(labeler.ready());
  nodes.put(node("n1", "1"));
  REQUIRE(eventually([&] { return api.patchCount() == 1; }, 10s));
  CHECK(eventually([&] { return labeler.ready(); }, 5s));
  CHECK(metrics.counter("gvirtus_labeler_errors_total", "").value() == 1);
  CHECK(api.patchAt(0)["metadata"]["labels"][gvirtus::names::kGpuPresent] == "false");
  nodes.put(api.api().get("n1").value());

  // A GPU appears: the probe's next look finds it and the node is labelled again.
  std::filesystem::create_directories(gpuDir);
  REQUIRE(clock.waitForSleeps(1));
  CHECK(clock.sleeps().front() == 30s);
  clock.advance(30s);
  REQUIRE(eventually([&] { return api.patchCount() == 2; }, 10s));
  CHECK(api.patchAt(1)["metadata"]["labels"] == json{{gvirtus::names::kGpuPresent, "true"}});
  std::filesystem::remove_all(gpuDir);
}
