#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "webhook/autoscale/autoscaler.h"
#include "webhook/release/parked_units.h"

// What the waiting-pod controller remembers about its release units beside its work queue
// (kube-scheduler's scheduling queue: the pool of unschedulable pods beside activeQ): the
// units parked until a change can help them, those put back and not tried yet, the lone
// pods whose patch is being written, and the releases the cache has not caught up with.
// Thread-safe; one per controller, reset for every term of leadership.
namespace gvirtus::webhook {

class ReleaseQueue {
 public:
  // Puts a unit's key on the work queue (the controller's LeaderController).
  using Enqueue = std::function<void(const std::string& unit)>;
  explicit ReleaseQueue(Enqueue enqueue) : enqueue_(std::move(enqueue)) {}

  // A new term: nothing parked, put back, written or released.
  void reset();

  // Units back on the work queue: these (a term's first look, oldest first); the oldest
  // `perGroup` of every parked group (a backend changed, the resync); or the next of one
  // group (a pod of it found room, or room was given back).
  void putBack(const std::vector<std::string>& units);
  void putBackOldest(size_t perGroup);
  void putBackNext(const ParkGroup& group);
  // The resync: the demand is told again, changed or not.
  void demandMayHaveChanged();

  // The backends changed, or a backend was given back: a unit judged before is parked no
  // more by a sync that began before (park()).
  void roomMayHaveChanged();

  // A unit's sync begins: it is parked no more. Its ticket for park(); none while its patch
  // is being written (the write's end enqueues it again when it fails).
  std::optional<uint64_t> begin(const std::string& unit);
  // A sync ended: true when no unit put back is left untried (the demand may be told).
  bool end();
  // Parks a unit its sync (`ticket`) found waiting; puts it back at once instead when room
  // may have changed since the sync began, as it judged backends older than the change.
  void park(ParkedUnits::Entry entry, uint64_t ticket);

  // Released by this term from `resourceVersion`: while the cache holds that version still,
  // the pod is not tried again (the patch's test would fail).
  void released(const std::string& uid, std::string resourceVersion);
  bool releasedAsCached(const nlohmann::json& pod) const;
  // The pod no longer waits, or is gone.
  void forget(const std::string& uid);

  // A lone pod's patch is being written (write_pool.h) ...
  void writing(const std::string& unit);
  // ... and has been: `failure` when it failed for another reason than a change of the pod,
  // which the unit's next sync returns (takeFailure), so that the work queue's backoff
  // decides when it is tried again.
  void written(const std::string& unit, std::optional<Error> failure);
  std::optional<Error> takeFailure(const std::string& unit);

  // What the parked units wait for, when the autoscaler should be told: none while units
  // put back are untried (the backends it would see may take them), nor when nothing
  // changed since the last tell.
  std::optional<std::vector<CapacityDemand>> demandToTell();

 private:
  void putBackLocked(const std::vector<std::string>& units);

  const Enqueue enqueue_;
  mutable std::mutex mutex_;
  ParkedUnits parked_;
  std::set<std::string> putBack_;
  bool demandChanged_ = true;
  uint64_t roomChanges_ = 0;
  // By pod UID: the resourceVersion each released pod was patched from.
  std::map<std::string, std::string> releasedFrom_;
  std::set<std::string> writing_;
  std::map<std::string, Error> failedWrites_;
};

}  // namespace gvirtus::webhook
