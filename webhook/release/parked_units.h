#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/contract/backend_requirements.h"
#include "webhook/autoscale/autoscaler.h"

// The release units that no backend could take when they were last tried, parked until a
// change can help them (kube-scheduler's pool of unschedulable pods). They are grouped by
// what they ask: when one unit of a group finds no room, the others, which ask the same,
// would find none either, so they are not tried again one by one; a change of the backends
// puts back the oldest few of every group, and each release puts back one more of its
// group. Not thread-safe: its owner locks.
namespace gvirtus::webhook {

// What parked units are grouped by: what a lone pod asks of a backend (less its name), or,
// for a gang or a unit that waits for its own reason, the unit itself.
struct ParkGroup {
  BackendRequirements asked;
  std::string unit;  // empty for a lone pod's group
  auto operator<=>(const ParkGroup&) const = default;
};

class ParkedUnits {
 public:
  struct Entry {
    std::string unit;  // the release unit's key
    ParkGroup group;
    SystemTime waitingSince;  // its oldest pod's creation
    // Its pods that wait for a backend with room (the autoscaler's input); empty when it
    // waits for another reason.
    std::vector<CapacityDemand> demand;
  };

  // Parks a unit, in place of what was parked under its key before.
  void park(Entry entry);
  // Takes a unit out (tried again, released, gone); false when it was not parked.
  bool remove(const std::string& unit);
  bool contains(const std::string& unit) const { return units_.contains(unit); }

  // Takes out the oldest `perGroup` units of every group, oldest groups first.
  std::vector<std::string> takeOldest(size_t perGroup);
  // Takes out the oldest `count` units of one group.
  std::vector<std::string> takeOldestOf(const ParkGroup& group, size_t count);

  // What the parked units wait for, oldest first.
  std::vector<CapacityDemand> demand() const;
  size_t size() const { return units_.size(); }
  void clear();

 private:
  // Within a group, by age, then key.
  using Place = std::tuple<SystemTime, std::string>;
  std::map<std::string, Entry> units_;
  std::map<ParkGroup, std::set<Place>> groups_;
};

}  // namespace gvirtus::webhook
