#pragma once

#include <mutex>
#include <optional>
#include <stop_token>
#include <vector>

#include "common/cache/object_cache.h"
#include "common/cache/resource_cache.h"
#include "common/controller/event_recorder.h"
#include "common/controller/leader_controller.h"
#include "common/kube/client.h"
#include "webhook/autoscale/autoscaler.h"
#include "webhook/placement/source.h"
#include "webhook/pods/gvirtus_pod_store.h"

// The backend autoscaler (webhook/autoscale/autoscaler.h) as a controller of its own, the
// leader's, beside the waiting-pod controller: one key, synced when that controller tells it
// the demand of the units it parked for want of room and the backends they were judged
// against (once every unit put back has been tried again), when a candidate GPU node
// changes, and again when the autoscaler wants its next look. A step so never sees a demand
// older than the backends: a backend that appeared, and is about to take the parked pods, is
// never taken for room still missing.
namespace gvirtus::webhook {

class WebhookMetrics;

class AutoscaleController {
 public:
  // `gvirtusPods`: every GVirtuS pod, as records (the pods a backend holds, for the idle
  // check), started by its owner. `metrics` may be null. Everything passed must
  // outlive the controller.
  AutoscaleController(KubeClient& client, const GvirtusPodStore& gvirtusPods, EventRecorder& events,
                      WebhookMetrics* metrics, AutoscaleOptions options);

  // From the waiting-pod controller: the pods parked for want of capacity and the backends
  // they were judged against. Never blocks.
  void demandSeen(std::vector<CapacityDemand> demand, BackendSnapshot backends);

  // One term as leader: the steps, until `stop`. May run again after it returned, starting
  // from nothing (another leader may have acted meanwhile: the nodes say what it did). The
  // first step waits for the term's first tell.
  void run(std::stop_token stop);

 private:
  // Node patches through `client_`, the idle check from `gvirtusPods_`, Events through
  // `events`.
  AutoscalerActions actions(EventRecorder& events);
  // GVirtuS pods given `backend` (gvirtus.io/backend-pod) that are not deleted or finished.
  Result<int64_t> assignedPods(const Backend& backend) const;
  // One step of the autoscaler over the candidates, the backends and the last demand.
  Result<SyncResult> step();

  KubeClient& client_;
  const GvirtusPodStore& gvirtusPods_;
  WebhookMetrics* metrics_;
  const AutoscaleOptions options_;
  BackendAutoscaler autoscaler_;

  LeaderController leader_;
  // The candidate GPU nodes: a change of one (an operator's edit, our own write) asks for a
  // step. Watched from the first term on; declared after leader_ so that its watch, whose
  // handlers enqueue on leader_, stops first.
  ResourceCache candidates_;

  // What the waiting-pod controller told last in this term; none before its first tell.
  struct DemandSeen {
    std::vector<CapacityDemand> demand;
    BackendSnapshot backends;
  };
  std::mutex mutex_;
  std::optional<DemandSeen> lastDemand_;
};

}  // namespace gvirtus::webhook
