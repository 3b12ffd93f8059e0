#include "webhook/release/parked_units.h"

#include <algorithm>

namespace gvirtus::webhook {

void ParkedUnits::park(Entry entry) {
  remove(entry.unit);
  groups_[entry.group].emplace(entry.waitingSince, entry.unit);
  std::string unit = entry.unit;
  units_.emplace(std::move(unit), std::move(entry));
}

bool ParkedUnits::remove(const std::string& unit) {
  auto it = units_.find(unit);
  if (it == units_.end()) {
    return false;
  }
  auto group = groups_.find(it->second.group);
  group->second.erase({it->second.waitingSince, unit});
  if (group->second.empty()) {
    groups_.erase(group);
  }
  units_.erase(it);
  return true;
}

std::vector<std::string> ParkedUnits::takeOldestOf(const ParkGroup& group, size_t count) {
  std::vector<std::string> taken;
  auto it = groups_.find(group);
  if (it == groups_.end()) {
    return taken;
  }
  for (auto place = it->second.begin(); place != it->second.end() && taken.size() < count;
       ++place) {
    taken.push_back(std::get<1>(*place));
  }
  for (const auto& unit : taken) {
    remove(unit);
  }
  return taken;
}

std::vector<std::string> ParkedUnits::takeOldest(size_t perGroup) {
  // Groups by the age of their oldest unit, so that the oldest waiting unit goes first.
  std::vector<std::pair<Place, ParkGroup>> heads;
  heads.reserve(groups_.size());
  for (const auto& [group, places] : groups_) {
    heads.emplace_back(*places.begin(), group);
  }
  std::sort(heads.begin(), heads.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> taken;
  for (const auto& head : heads) {
    auto some = takeOldestOf(head.second, perGroup);
    taken.insert(taken.end(), some.begin(), some.end());
  }
  return taken;
}

std::vector<CapacityDemand> ParkedUnits::demand() const {
  std::vector<CapacityDemand> all;
  for (const auto& [unit, entry] : units_) {
    all.insert(all.end(), entry.demand.begin(), entry.demand.end());
  }
  std::sort(all.begin(), all.end(), [](const CapacityDemand& a, const CapacityDemand& b) {
    return std::tie(a.waitingSince, a.pod.ns, a.pod.name) <
           std::tie(b.waitingSince, b.pod.ns, b.pod.name);
  });
  return all;
}

void ParkedUnits::clear() {
  units_.clear();
  groups_.clear();
}

}  // namespace gvirtus::webhook
