// The DRA slice publisher without an API server: the backends come from a FakeBackendSource,
// the slices from a FakeObjectCache, and the writes go to a recorder that, like the API
// server and the watch after it, stores what was written with a new resourceVersion. On
// the real control plane: slice_publisher_integration_test.cpp.
#include "webhook/dra/slice_publisher.h"

#include <catch2/catch.hpp>
#include <mutex>

#include "common/base/json_access.h"
#include "support/fake_object_cache.h"
#include "webhook/dra/slice.h"
#include "webhook/fixtures.h"

using namespace gvirtus::webhook;
using gvirtus::fail;
using gvirtus::GpuLoad;
using gvirtus::Result;
using gvirtus::stringAt;
using gvirtus::testing::FakeObjectCache;
using gvirtus::webhook::testing::backend;
using gvirtus::webhook::testing::FakeBackendSource;
using nlohmann::json;

namespace {

struct Recorder {
  explicit Recorder(FakeObjectCache& cache) : slices(cache) {}
  FakeObjectCache& slices;
  std::vector<std::string> writes;  // "create NAME", "update NAME", "delete NAME"
  int64_t version = 100;
  bool refuse = false;

  Result<void> store(const std::string& verb, json slice) {
    const std::string name = stringAt(slice, {"metadata", "name"});
    writes.push_back(verb + " " + name);
    if (refuse) {
      return fail("refused");
    }
    slice["metadata"]["uid"] = "uid-" + name;
    slice["metadata"]["resourceVersion"] = std::to_string(++version);
    slices.put(std::move(slice));
    return {};
  }
  SliceApi api() {
    return {.create = [this](const json& slice) { return store("create", slice); },
            .update = [this](const json& slice) { return store("update", slice); },
            .remove = [this](const std::string& name, const std::string& uid) -> Result<void> {
              writes.push_back("delete " + name);
              // The API server's precondition: only the slice the publisher looked at.
              auto held = slices.get("", name);
              if (!held || stringAt(*held, {"metadata", "uid"}) != uid) {
                return fail("precondition failed: uid " + uid);
              }
              slices.remove("", name);
              return {};
            }};
  }
};

struct Fixture {
  FakeBackendSource backends{{backend("10.0.0.1", 0, 16, "be-1")}};
  FakeObjectCache slices;
  Recorder recorder{slices};
  SlicePublisher publisher{backends, slices, recorder.api()};
  const std::string name = "gvirtus-gvirtus-system-be-1";
};

}  // namespace

TEST_CASE("a slice is written once per change of what a backend offers", "[slice-publisher]") {
  Fixture f;
  f.slices.start();
  REQUIRE(f.publisher.sync(f.name).value());
  CHECK(f.recorder.writes == std::vector<std::string>{"create " + f.name});
  // The load of the moment changes, the offer does not: nothing written.
  Backend busy = backend("10.0.0.1", 5, 16, "be-1");
  busy.load->gpus[0].memoryUsedMiB = 70000;
  f.backends.set({busy});
  CHECK_FALSE(f.publisher.sync(f.name).value());
  CHECK(f.recorder.writes.size() == 1);

  // More memory: an update over the version held, the pool's next generation.
  Backend bigger = busy;
  bigger.load->gpus.push_back(GpuLoad{1, 81920, 0, 0, {}, {}});
  f.backends.set({bigger});
  REQUIRE(f.publisher.sync(f.name).value());
  CHECK(f.recorder.writes.back() == "update " + f.name);
  auto held = f.slices.get("", f.name);
  REQUIRE(held);
  CHECK((*held)["spec"]["pool"]["generation"] == 2);
  CHECK((*held)["spec"]["devices"].size() == 2);
  CHECK_FALSE(f.publisher.sync(f.name).value());
}

TEST_CASE("a backend that is draining or gone is withdrawn, and a stray slice too",
          "[slice-publisher]") {
  Fixture f;
  f.slices.start();
  REQUIRE(f.publisher.sync(f.name).value());
  Backend draining = backend("10.0.0.1", 0, 16, "be-1");
  draining.draining = true;
  f.backends.set({draining});
  REQUIRE(f.publisher.sync(f.name).value());
  CHECK(f.recorder.writes.back() == "delete " + f.name);
  CHECK_FALSE(f.slices.get("", f.name));

  // A slice of this driver no backend stands behind (a backend deleted while no replica
  // led): withdrawn too.
  f.slices.put({{"metadata", {{"name", "gvirtus-old-be"}, {"uid", "u"}, {"resourceVersion", "1"}}},
                {"spec", {{"driver", kDraDriver}}}});
  REQUIRE(f.publisher.sync("gvirtus-old-be").value());
  CHECK(f.recorder.writes.back() == "delete gvirtus-old-be");
  CHECK_FALSE(f.publisher.sync("gvirtus-old-be").value());
}

TEST_CASE("a slice edited by someone else is written back, or made again", "[slice-publisher]") {
  Fixture f;
  f.slices.start();
  REQUIRE(f.publisher.sync(f.name).value());
  // Its endpoint pointed elsewhere: written back over the edit.
  json edited = *f.slices.get("", f.name);
  edited["spec"]["devices"][0]["attributes"]["endpoint"] = {{"string", "10.6.6.6:9999"}};
  edited["metadata"]["resourceVersion"] = "500";
  f.slices.put(edited);
  REQUIRE(f.publisher.sync(f.name).value());
  CHECK(f.recorder.writes.back() == "update " + f.name);
  auto held = f.slices.get("", f.name);
  CHECK((*held)["spec"]["devices"][0]["attributes"]["endpoint"]["string"] == "10.0.0.1:9999");

  // A node's slice under this name (created first, the same devices): deleted with its uid,
  // then the right one is created.
  json nodes = *held;
  nodes["spec"].erase("nodeSelector");
  nodes["spec"]["nodeName"] = "gpu-7";
  nodes["metadata"]["uid"] = "uid-of-the-node";
  f.slices.put(nodes);
  REQUIRE(f.publisher.sync(f.name).value());
  CHECK(f.recorder.writes.back() == "delete " + f.name);
  CHECK_FALSE(f.slices.get("", f.name));
  REQUIRE(f.publisher.sync(f.name).value());
  CHECK(f.recorder.writes.back() == "create " + f.name);
  CHECK_FALSE(f.slices.get("", f.name)->at("spec").contains("nodeName"));
}

TEST_CASE("a failed write is an error, for the controller to retry", "[slice-publisher]") {
  Fixture f;
  f.slices.start();
  f.recorder.refuse = true;
  auto wrote = f.publisher.sync(f.name);
  REQUIRE_FALSE(wrote.has_value());
  CHECK(wrote.error().message.find("publish ResourceSlice " + f.name) != std::string::npos);
  f.recorder.refuse = false;
  CHECK(f.publisher.sync(f.name).value());
}
