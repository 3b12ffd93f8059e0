// What the waiting-pod controller remembers beside its work queue (webhook/release/queue.h):
// units put back go on the work queue and are tried before the autoscaler is told; a unit
// being written is not chosen for again; a failed write comes back as the next sync's error.
#include "webhook/release/queue.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "webhook/fixtures.h"
#include "webhook/release_fixtures.h"

using namespace gvirtus::webhook;
using namespace gvirtus::webhook::testing;
using namespace gvirtus::webhook::release_testing;
using gvirtus::BackendRequirements;
using gvirtus::Error;
using Names = std::vector<std::string>;

namespace {

ParkGroup anyGpu() {
  return {.asked = BackendRequirements{}, .unit = ""};
}

ParkedUnits::Entry waitsForRoom(const std::string& unit, int second) {
  const SystemTime since = SystemTime{} + std::chrono::seconds(second);
  return {.unit = unit,
          .group = anyGpu(),
          .waitingSince = since,
          .demand = {{{"v1", "Pod", "team-a", unit, "", ""}, {}, since}}};
}

}  // namespace

TEST_CASE("units put back are enqueued and tried before the demand is told", "[waiting][queue]") {
  Names enqueued;
  ReleaseQueue queue([&](const std::string& unit) { enqueued.push_back(unit); });
  // A term's first look: nothing is told until both were tried.
  queue.putBack({"team-a/a", "team-a/b"});
  CHECK(enqueued == Names{"team-a/a", "team-a/b"});
  CHECK_FALSE(queue.demandToTell());
  auto ticket = queue.begin("team-a/a");
  REQUIRE(ticket);
  queue.park(waitsForRoom("team-a/a", 1), *ticket);
  CHECK_FALSE(queue.end());
  CHECK_FALSE(queue.demandToTell());
  ticket = queue.begin("team-a/b");
  REQUIRE(ticket);
  queue.park(waitsForRoom("team-a/b", 2), *ticket);
  CHECK(queue.end());
  auto demand = queue.demandToTell();
  REQUIRE(demand);
  REQUIRE(demand->size() == 2);
  CHECK((*demand)[0].pod.name == "team-a/a");
  // Nothing changed since: not told again, until the resync says so.
  CHECK_FALSE(queue.demandToTell());
  queue.demandMayHaveChanged();
  CHECK(queue.demandToTell());

  // A backend changed: the oldest of the group come back, and are parked no more.
  enqueued.clear();
  queue.putBackOldest(1);
  CHECK(enqueued == Names{"team-a/a"});
  queue.putBackNext(anyGpu());
  CHECK(enqueued == Names{"team-a/a", "team-a/b"});
  queue.putBackNext(anyGpu());
  CHECK(enqueued.size() == 2);
}

TEST_CASE("a unit judged before the backends changed is put back, not parked", "[waiting][queue]") {
  Names enqueued;
  ReleaseQueue queue([&](const std::string& unit) { enqueued.push_back(unit); });
  auto ticket = queue.begin("team-a/a");
  REQUIRE(ticket);
  // A backend appeared while the sync judged the older list: nothing was parked to put back.
  queue.roomMayHaveChanged();
  queue.putBackOldest(8);
  CHECK(enqueued.empty());
  queue.park(waitsForRoom("team-a/a", 1), *ticket);
  CHECK(enqueued == Names{"team-a/a"});
  CHECK_FALSE(queue.end());  // put back, untried
  // Tried again against the new list, it is parked.
  ticket = queue.begin("team-a/a");
  queue.park(waitsForRoom("team-a/a", 1), *ticket);
  CHECK(queue.end());
  enqueued.clear();
  queue.putBackOldest(8);
  CHECK(enqueued == Names{"team-a/a"});
}

TEST_CASE("a unit being written is not chosen for again, and a failed write fails its next sync",
          "[waiting][queue]") {
  ReleaseQueue queue([](const std::string&) {});
  queue.writing("team-a/a");
  CHECK_FALSE(queue.begin("team-a/a").has_value());
  queue.written("team-a/a", Error{"etcdserver: request timed out", 500, "InternalError"});
  CHECK(queue.begin("team-a/a").has_value());
  auto failure = queue.takeFailure("team-a/a");
  REQUIRE(failure);
  CHECK(failure->httpStatus == 500);
  CHECK_FALSE(queue.takeFailure("team-a/a"));

  // Written: the cache's copy from before the patch is not tried again; a newer one is.
  json pod = waitingPod("a", "2026-11-22T10:00:00Z");
  queue.writing("team-a/a");
  queue.written("team-a/a", std::nullopt);
  queue.released(podUid(pod), "100");
  CHECK(queue.releasedAsCached(pod));
  pod["metadata"]["resourceVersion"] = "101";
  CHECK_FALSE(queue.releasedAsCached(pod));
  queue.forget(podUid(pod));
  pod["metadata"]["resourceVersion"] = "100";
  CHECK_FALSE(queue.releasedAsCached(pod));
}
