#include "webhook/release/queue.h"

#include "common/base/json_access.h"
#include "webhook/release/pass.h"

namespace gvirtus::webhook {

void ReleaseQueue::reset() {
  std::lock_guard lock(mutex_);
  parked_.clear();
  putBack_.clear();
  demandChanged_ = true;
  releasedFrom_.clear();
  writing_.clear();
  failedWrites_.clear();
}

void ReleaseQueue::putBack(const std::vector<std::string>& units) {
  std::lock_guard lock(mutex_);
  putBackLocked(units);
}

void ReleaseQueue::putBackOldest(size_t perGroup) {
  std::lock_guard lock(mutex_);
  putBackLocked(parked_.takeOldest(perGroup));
}

void ReleaseQueue::putBackNext(const ParkGroup& group) {
  std::lock_guard lock(mutex_);
  putBackLocked(parked_.takeOldestOf(group, 1));
}

void ReleaseQueue::putBackLocked(const std::vector<std::string>& units) {
  for (const auto& unit : units) {
    putBack_.insert(unit);
    enqueue_(unit);
  }
}

void ReleaseQueue::demandMayHaveChanged() {
  std::lock_guard lock(mutex_);
  demandChanged_ = true;
}

void ReleaseQueue::roomMayHaveChanged() {
  std::lock_guard lock(mutex_);
  ++roomChanges_;
}

std::optional<uint64_t> ReleaseQueue::begin(const std::string& unit) {
  std::lock_guard lock(mutex_);
  parked_.remove(unit);
  putBack_.erase(unit);  // tried now; park() may put it back again
  return writing_.contains(unit) ? std::nullopt : std::optional(roomChanges_);
}

bool ReleaseQueue::end() {
  std::lock_guard lock(mutex_);
  demandChanged_ = true;
  return putBack_.empty();
}

void ReleaseQueue::park(ParkedUnits::Entry entry, uint64_t ticket) {
  std::lock_guard lock(mutex_);
  if (ticket != roomChanges_) {
    putBackLocked({entry.unit});
    return;
  }
  parked_.park(std::move(entry));
}

void ReleaseQueue::released(const std::string& uid, std::string resourceVersion) {
  std::lock_guard lock(mutex_);
  releasedFrom_.insert_or_assign(uid, std::move(resourceVersion));
}

bool ReleaseQueue::releasedAsCached(const nlohmann::json& pod) const {
  std::lock_guard lock(mutex_);
  auto it = releasedFrom_.find(podUid(pod));
  return it != releasedFrom_.end() && it->second == stringAt(pod, {"metadata", "resourceVersion"});
}

void ReleaseQueue::forget(const std::string& uid) {
  std::lock_guard lock(mutex_);
  releasedFrom_.erase(uid);
}

void ReleaseQueue::writing(const std::string& unit) {
  std::lock_guard lock(mutex_);
  writing_.insert(unit);
}

void ReleaseQueue::written(const std::string& unit, std::optional<Error> failure) {
  std::lock_guard lock(mutex_);
  writing_.erase(unit);
  if (failure) {
    failedWrites_.insert_or_assign(unit, std::move(*failure));
  }
}

std::optional<Error> ReleaseQueue::takeFailure(const std::string& unit) {
  std::lock_guard lock(mutex_);
  auto failed = failedWrites_.extract(unit);
  return failed ? std::optional(std::move(failed.mapped())) : std::nullopt;
}

std::optional<std::vector<CapacityDemand>> ReleaseQueue::demandToTell() {
  std::lock_guard lock(mutex_);
  if (!putBack_.empty() || !demandChanged_) {
    return std::nullopt;
  }
  demandChanged_ = false;
  return parked_.demand();
}

}  // namespace gvirtus::webhook
