// The pool of release units no backend could take (webhook/release/parked_units.h): grouped
// by what they ask, put back oldest first, a few per group, their demand told oldest first.
#include "webhook/release/parked_units.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

using namespace gvirtus::webhook;
using gvirtus::BackendRequirements;
using Names = std::vector<std::string>;

namespace {

SystemTime at(int second) {
  return SystemTime{} + std::chrono::seconds(second);
}

ParkGroup asking(int64_t gpuMemoryMiB) {
  BackendRequirements asked;
  asked.gpuMemoryMiB = gpuMemoryMiB;
  return {.asked = asked, .unit = ""};
}

ParkedUnits::Entry entry(const std::string& unit, ParkGroup group, int second,
                         bool forCapacity = true) {
  ParkedUnits::Entry parked{
      .unit = unit, .group = std::move(group), .waitingSince = at(second), .demand = {}};
  if (forCapacity) {
    parked.demand.push_back({{"v1", "Pod", "team-a", unit, "", ""}, {}, at(second)});
  }
  return parked;
}

}  // namespace

TEST_CASE("a group gives back its oldest units first, a few at a time", "[waiting][parked]") {
  ParkedUnits parked;
  parked.park(entry("team-a/c", asking(1024), 3));
  parked.park(entry("team-a/a", asking(1024), 1));
  parked.park(entry("team-a/b", asking(1024), 2));
  parked.park(entry("team-a/big", asking(65536), 0));
  CHECK(parked.size() == 4);

  // One of a group: the oldest, and only from that group.
  CHECK(parked.takeOldestOf(asking(1024), 1) == Names{"team-a/a"});
  CHECK_FALSE(parked.contains("team-a/a"));
  CHECK(parked.takeOldestOf(asking(2048), 1).empty());

  // A few of every group, the group whose oldest waits longest first.
  CHECK(parked.takeOldest(1) == Names{"team-a/big", "team-a/b"});
  CHECK(parked.takeOldest(8) == Names{"team-a/c"});
  CHECK(parked.size() == 0);
  CHECK(parked.takeOldest(8).empty());
}

TEST_CASE("a unit parked again replaces its entry, and one removed is no longer given back",
          "[waiting][parked]") {
  ParkedUnits parked;
  parked.park(entry("team-a/a", asking(1024), 1));
  // Its pod changed: it now asks more, and waits in that group only.
  parked.park(entry("team-a/a", asking(4096), 1));
  CHECK(parked.size() == 1);
  CHECK(parked.takeOldestOf(asking(1024), 8).empty());
  CHECK(parked.takeOldestOf(asking(4096), 8) == Names{"team-a/a"});

  parked.park(entry("team-a/b", asking(1024), 2));
  CHECK(parked.remove("team-a/b"));
  CHECK_FALSE(parked.remove("team-a/b"));
  CHECK(parked.takeOldest(8).empty());
}

TEST_CASE("the demand is what the units parked for capacity wait for, oldest first",
          "[waiting][parked]") {
  ParkedUnits parked;
  parked.park(entry("team-a/late", asking(1024), 9));
  parked.park(entry("team-a/early", asking(2048), 1));
  // A gang waiting for its members is parked in a group of its own, with no demand.
  parked.park(
      entry("gang:team-a/trainers", {.asked = {}, .unit = "gang:team-a/trainers"}, 0, false));
  const auto demand = parked.demand();
  REQUIRE(demand.size() == 2);
  CHECK(demand[0].pod.name == "team-a/early");
  CHECK(demand[1].pod.name == "team-a/late");
  parked.clear();
  CHECK(parked.demand().empty());
  CHECK(parked.size() == 0);
}
