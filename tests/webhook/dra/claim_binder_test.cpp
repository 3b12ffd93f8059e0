// The claim binder without an API server: claims come from a FakeObjectCache, the backends
// from a FakeBackendSource, room from the real chooser, and the status applies go to a
// recorder. On real nodes: tests/e2e/real/scenarios/81-dra-binding-conditions.sh.
#include "webhook/dra/claim_binder.h"

#include <catch2/catch.hpp>

#include "common/time/time_text.h"
#include "support/fake_object_cache.h"
#include "webhook/dra/binding.h"
#include "webhook/dra/slice.h"
#include "webhook/fixtures.h"

using namespace gvirtus::webhook;
using gvirtus::fail;
using gvirtus::formatRfc3339;
using gvirtus::Result;
using gvirtus::testing::FakeObjectCache;
using gvirtus::webhook::testing::backend;
using gvirtus::webhook::testing::FakeBackendSource;
using nlohmann::json;
using std::chrono::system_clock;

namespace {

constexpr const char* kShare = "5b3b1f2c-7f3e-4c1e-9d3a-0a1b2c3d4e5f";

// A claim of namespace "team" allocated gpu-0 of backend pod `pod`, `ago` before now, with the
// binding conditions the slice's device carried (`conditions`), as kube-scheduler writes it.
json claim(const std::string& name, const std::string& pod = "be-1", bool conditions = true,
           std::chrono::seconds ago = std::chrono::seconds(1)) {
  json result = {{"request", "gpu"},
                 {"driver", "gpu.gvirtus.io"},
                 {"pool", "gvirtus-system/" + pod},
                 {"device", "gpu-0"},
                 {"shareID", kShare},
                 {"consumedCapacity", {{"memory", "4Gi"}, {"sessions", "1"}}}};
  if (conditions) {
    result["bindingConditions"] = json::array({kBackendReadyCondition});
    result["bindingFailureConditions"] = json::array({kBackendRefusedCondition});
  }
  return {{"metadata", {{"name", name}, {"namespace", "team"}, {"uid", "uid-" + name}}},
          {"status",
           {{"allocation",
             {{"allocationTimestamp", formatRfc3339(system_clock::now() - ago)},
              {"devices", {{"results", json::array({result})}}}}}}}};
}

ChooserOptions chooserOptions() {
  ChooserOptions options;
  options.instance = "test";
  return options;
}

struct Fixture {
  explicit Fixture(std::vector<Backend> list) : backends(std::move(list)) {}
  FakeBackendSource backends;
  FakeObjectCache claims;
  BackendChooser chooser{chooserOptions()};
  std::vector<json> applied;
  bool refuse = false;
  ClaimBinder binder{backends, claims, chooser,
                     [this](const json& status) -> Result<void> {
                       if (refuse) {
                         return fail("refused");
                       }
                       applied.push_back(status);
                       return {};
                     },
                     ClaimBinderOptions{.timeout = std::chrono::seconds(60)}};
  // The one condition of the last apply's one device: {type, reason}.
  std::pair<std::string, std::string> answer() const {
    const json& condition = applied.back()["status"]["devices"][0]["conditions"][0];
    return {condition["type"], condition["reason"]};
  }
};

}  // namespace

TEST_CASE("a claim waits for the binder only where its device carries our conditions",
          "[dra-binding]") {
  auto wait = bindingWait(claim("a"));
  REQUIRE(wait.devices.size() == 1);
  CHECK(wait.devices[0].pool == "gvirtus-system/be-1");
  CHECK(wait.devices[0].shareId == kShare);
  REQUIRE(wait.allocatedAt.has_value());
  CHECK(system_clock::now() - *wait.allocatedAt < std::chrono::seconds(5));
  // A slice published without binding conditions (an older API server): nothing waits.
  CHECK(bindingWait(claim("b", "be-1", false)).devices.empty());
  // Answered already, either way: nothing waits.
  json answered = claim("c");
  answered["status"]["devices"] = json::array(
      {{{"driver", "gpu.gvirtus.io"},
        {"pool", "gvirtus-system/be-1"},
        {"device", "gpu-0"},
        {"shareID", kShare},
        {"conditions", json::array({{{"type", kBackendRefusedCondition}, {"status", "True"}}})}}});
  CHECK(bindingWait(answered).devices.empty());
  // Another share of the same device answered is not this one's answer.
  answered["status"]["devices"][0]["shareID"] = "another";
  CHECK(bindingWait(answered).devices.size() == 1);
  // Not allocated: nothing.
  CHECK(bindingWait(json{{"metadata", {{"name", "d"}}}}).devices.empty());
}

TEST_CASE("a backend gone or draining is refused at once, a full one waited for until the timeout",
          "[dra-binding]") {
  const auto timeout = std::chrono::seconds(60);
  CHECK(decideBinding(nullptr, std::nullopt, {}, timeout).reason == "BackendGone");
  Backend draining = backend("10.0.0.1", 0, 4, "be-1");
  draining.draining = true;
  auto refused = decideBinding(&draining, std::nullopt, {}, timeout);
  CHECK(refused.answer == BindingAnswer::kRefuse);
  CHECK(refused.reason == "BackendDraining");
  Backend open = backend("10.0.0.1", 0, 4, "be-1");
  CHECK(decideBinding(&open, std::nullopt, {}, timeout).answer == BindingAnswer::kReady);
  auto full = decideBinding(&open, "full", std::chrono::seconds(59), timeout);
  CHECK(full.answer == BindingAnswer::kWait);
  full = decideBinding(&open, "full", timeout, timeout);
  CHECK(full.answer == BindingAnswer::kRefuse);
  CHECK(full.reason == "BackendFull");
}

TEST_CASE("a claim with room is answered ready and holds its session from then on",
          "[dra-binding]") {
  // One session: the first claim takes it, the second waits for it.
  Fixture f({backend("10.0.0.1", 0, 1, "be-1")});
  f.claims.put(claim("first"));
  f.claims.put(claim("second"));
  f.claims.start();
  auto first = f.binder.sync("team/first");
  REQUIRE(first.has_value());
  REQUIRE(f.applied.size() == 1);
  CHECK(f.answer() ==
        std::pair<std::string, std::string>{kBackendReadyCondition, "RoomForSession"});
  const json& entry = f.applied[0]["status"]["devices"][0];
  CHECK(entry["shareID"] == kShare);
  CHECK(entry["pool"] == "gvirtus-system/be-1");
  CHECK(entry["conditions"][0]["status"] == "True");
  CHECK(f.applied[0]["metadata"] == json{{"name", "first"}, {"namespace", "team"}});

  auto second = f.binder.sync("team/second");
  REQUIRE(second.has_value());
  CHECK(f.applied.size() == 1);
  // Looked at again by the timeout's end at the latest.
  REQUIRE(second->requeueAfter.has_value());
  CHECK(*second->requeueAfter <= std::chrono::seconds(60));
  CHECK(*second->requeueAfter > std::chrono::seconds(50));
}

TEST_CASE("a claim answered is not answered again before the cache shows the answer",
          "[dra-binding]") {
  // Two sessions: a second answer for the same claim would take the other one.
  Fixture f({backend("10.0.0.1", 0, 2, "be-1")});
  f.claims.put(claim("first"));
  f.claims.put(claim("second"));
  f.claims.start();
  REQUIRE(f.binder.sync("team/first").has_value());
  // A backend's change before the watch brought the answer: the claim is looked at again.
  REQUIRE(f.binder.sync("team/first").has_value());
  CHECK(f.applied.size() == 1);
  REQUIRE(f.binder.sync("team/second").has_value());
  REQUIRE(f.applied.size() == 2);
  CHECK(f.answer().first == kBackendReadyCondition);
}

TEST_CASE("one device refused refuses the claim, whatever the others wait for", "[dra-binding]") {
  Fixture f({backend("10.0.0.1", 1, 1, "be-1")});
  json both = claim("both");
  json gone = both["status"]["allocation"]["devices"]["results"][0];
  gone["pool"] = "gvirtus-system/be-9";
  gone["shareID"] = "6c4c2f3d-8a4f-4d2f-8e4b-1b2c3d4e5f60";
  both["status"]["allocation"]["devices"]["results"].push_back(gone);
  f.claims.put(both);
  f.claims.start();
  REQUIRE(f.binder.sync("team/both").has_value());
  REQUIRE(f.applied.size() == 1);
  CHECK(f.answer() == std::pair<std::string, std::string>{kBackendRefusedCondition, "BackendGone"});
  CHECK(f.applied[0]["status"]["devices"].size() == 2);
}

TEST_CASE("a backend full past the timeout, gone, or draining refuses the claim", "[dra-binding]") {
  Backend draining = backend("10.0.0.2", 0, 4, "be-2");
  draining.draining = true;
  Fixture f({backend("10.0.0.1", 1, 1, "be-1"), draining});
  f.claims.put(claim("late", "be-1", true, std::chrono::seconds(90)));
  f.claims.put(claim("orphan", "be-9"));
  f.claims.put(claim("drained", "be-2"));
  f.claims.start();
  REQUIRE(f.binder.sync("team/late").has_value());
  CHECK(f.answer() == std::pair<std::string, std::string>{kBackendRefusedCondition, "BackendFull"});
  REQUIRE(f.binder.sync("team/orphan").has_value());
  CHECK(f.answer() == std::pair<std::string, std::string>{kBackendRefusedCondition, "BackendGone"});
  REQUIRE(f.binder.sync("team/drained").has_value());
  CHECK(f.answer() ==
        std::pair<std::string, std::string>{kBackendRefusedCondition, "BackendDraining"});
  // A claim no longer held, or not waiting: nothing written.
  REQUIRE(f.binder.sync("team/gone").has_value());
  CHECK(f.applied.size() == 3);
}

TEST_CASE("an answer that cannot be written holds no session", "[dra-binding]") {
  Fixture f({backend("10.0.0.1", 0, 1, "be-1")});
  f.claims.put(claim("first"));
  f.claims.put(claim("second"));
  f.claims.start();
  f.refuse = true;
  CHECK_FALSE(f.binder.sync("team/first").has_value());
  f.refuse = false;
  // The session the failed answer had reserved is free again.
  REQUIRE(f.binder.sync("team/second").has_value());
  REQUIRE(f.applied.size() == 1);
  CHECK(f.answer().first == kBackendReadyCondition);
}

TEST_CASE("a published device carries the binder's conditions", "[dra-binding]") {
  auto slice = resourceSliceFor(backend("10.0.0.1", 0, 4, "be-1"));
  REQUIRE(slice.has_value());
  json held = *slice;
  addBindingConditions(*slice);
  const json& device = (*slice)["spec"]["devices"][0];
  CHECK(device["bindingConditions"] == json::array({kBackendReadyCondition}));
  CHECK(device["bindingFailureConditions"] == json::array({kBackendRefusedCondition}));
  // A slice held without them is written again; one held with them is left alone.
  CHECK(compareSlices(held, *slice) == SliceChange::kUpdate);
  CHECK(compareSlices(*slice, *slice) == SliceChange::kNone);
}
