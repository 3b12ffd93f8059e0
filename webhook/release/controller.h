#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/cache/resource_cache.h"
#include "common/controller/controller.h"
#include "common/controller/event_recorder.h"
#include "common/controller/leader_controller.h"
#include "common/kube/client.h"
#include "common/time/duration.h"
#include "webhook/autoscale/autoscaler.h"
#include "webhook/placement/assigner.h"
#include "webhook/placement/chooser.h"
#include "webhook/placement/source.h"
#include "webhook/pods/gvirtus_pod_store.h"
#include "webhook/release/parked_units.h"
#include "webhook/release/pass.h"
#include "webhook/release/queue.h"
#include "webhook/release/reporter.h"
#include "webhook/release/units.h"
#include "webhook/release/write_pool.h"

// The waiting-pod controller (docs/pod-contract.md): GVirtuS pods admitted while no backend
// could take them carry the scheduling gate gvirtus.io/backend; when a backend can take one,
// one patch writes its backend annotations and removes the gate. Shaped like kube-scheduler's
// scheduling queue: one queue entry per release unit, parked while no backend can take it.
// What one unit's release does, and gangs, are in webhook/release/pass.h.
namespace gvirtus::webhook {

class WebhookMetrics;

struct WaitingPodControllerOptions {
  // The webhook's own namespace: its pods are never gated, never touched.
  std::string ownNamespace;
  std::vector<std::string> plugins;  // empty: defaultPlugins()
  // The parked units are put back at least this often: load reports age and own
  // assignments expire without any event.
  Duration resync = std::chrono::seconds(10);
  // Told the units parked for want of capacity and the backends they were judged against,
  // once every unit put back has been tried again (the autoscale controller's input).
  // Empty: nobody is told.
  std::function<void(std::vector<CapacityDemand>, BackendSnapshot)> onDemand;
  // Release patches written at once (write_pool.h), and a gang's members; also how many
  // units of a group are put back at once when a backend changes.
  size_t parallelReleases = 8;
  // Every GVirtuS pod, as records (the cluster backend source's store, started by its
  // owner): the gang members already released. Null: run() keeps such a store of its own
  // while it runs.
  GvirtusPodStore* gvirtusPods = nullptr;
};

// Watches the waiting GVirtuS pods (label gvirtus.io/enabled=true, unscheduled, in every
// namespace but the webhook's own), KAI-Scheduler's PodGroups (none without its CRD) and the
// backends. Each release unit (a pod, or the waiting members of a gang) is one key of a
// LeaderController: a change of one of its pods, of its PodGroup or of a released member
// enqueues it, and its sync releases it (pass.h) or parks it (parked_units.h). A change of
// the backends, a release, and every `resync`, put parked units back, oldest first. As in
// kube-scheduler, one worker gives pods their backends, one at a time in the queue's order,
// and a lone pod's patch is written beside it (write_pool.h, the binding cycle). A sync reads
// only caches: it sends no GET or LIST. What it decided is told by a ReleaseReporter (Events,
// log, metrics).
//
// run() is the leader's work (or everyone's without --leader-elect): it watches only while
// it runs. backendsChanged() is called by the backend source on every replica, so that a
// new leader knows since when each backend could take pods.
class WaitingPodController {
 public:
  // `metrics` may be null. Everything passed must outlive the controller.
  WaitingPodController(KubeClient& client, const BackendSource& backends, BackendChooser& chooser,
                       EventRecorder& events, WebhookMetrics* metrics,
                       WaitingPodControllerOptions options);

  // From the backend source's change callback: never blocks.
  void backendsChanged();

  // Runs until `stop`: one term of the pod watch and the syncs. May run again after it
  // returned.
  void run(std::stop_token stop);

 private:
  // One sync of the key: a unit, the resync or the tell of the demand.
  Result<SyncResult> sync(const std::string& key);
  // A unit's sync: a lone pod is given a backend here and its patch written by writes_; a
  // gang's members are written here, its first member before the others (pass.h).
  Result<SyncResult> syncUnit(const std::string& key);
  Result<SyncResult> releaseGang(const std::string& key, const std::vector<ObjectSnapshot>& pods,
                                 uint64_t ticket);
  // Writes one release patch.
  ReleaseWriter writer();
  // A lone pod's release patch has been written, or has failed: on a pool thread.
  void written(PendingWrite write, Result<void> result);
  // The waiting pods of a unit now, less those released by this term and not yet seen so;
  // empty when the unit is gone or its pods now belong to other units (enqueued). Its sync
  // has begun (ReleaseQueue::begin()).
  std::vector<ObjectSnapshot> podsOfUnit(const std::string& key);
  // Reports a unit's outcomes, and parks it when a pod of it waits. False when a write
  // failed for another reason than a change of the pod.
  bool settle(const std::string& key, const std::vector<PodOutcome>& outcomes, uint64_t ticket);
  // The parked units' demand to the autoscaler, when the queue says it is time.
  void tellDemand();
  // Handlers of the waiting pods, the PodGroups and every GVirtuS pod (a gang member
  // released or gone changes what its gang waits for).
  ResourceEventHandlers waitingPodHandlers();
  ResourceEventHandlers podGroupHandlers();
  ResourceEventHandlers gangMemberHandlers();
  // A term's first look: every waiting unit, oldest first, then the resync.
  void enqueueAll();

  KubeClient& client_;
  const BackendSource& backends_;
  BackendChooser& chooser_;
  WebhookMetrics* metrics_;
  WaitingPodControllerOptions options_;
  ReleaseReporter reporter_;
  LeaderController leader_;
  ReleaseQueue queue_;
  // The one worker's: lone pods are given backends one at a time, in the queue's order.
  BackendAssigner assigner_;
  std::unique_ptr<WritePool> writes_;  // while run() runs
  // While run() runs (set before its term starts, read by its syncs).
  const TermCaches* caches_ = nullptr;
  const ReleaseUnits* units_ = nullptr;
  std::stop_token stop_;

  std::mutex mutex_;  // offers_
  // Per backend (IP:PORT): the backend as last seen, its load's `updated` and its pods left
  // out (a heartbeat or another pod given it changes nothing), and since when it has been so.
  struct Offer {
    Backend backend;
    std::chrono::system_clock::time_point since;
  };
  std::map<std::string, Offer> offers_;
};

}  // namespace gvirtus::webhook
