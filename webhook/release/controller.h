#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/base/json_patch.h"
#include "common/cache/resource_cache.h"
#include "common/controller/controller.h"
#include "common/controller/event_recorder.h"
#include "common/kube/client.h"
#include "common/time/duration.h"
#include "webhook/autoscale/autoscaler.h"
#include "webhook/placement/chooser.h"
#include "webhook/placement/source.h"
#include "webhook/pods/gvirtus_pod_store.h"
#include "webhook/pods/pod_wiring.h"
#include "webhook/release/pass.h"
#include "webhook/release/reporter.h"

// The waiting-pod controller (docs/pod-contract.md): GVirtuS pods admitted
// while no backend could take them carry the scheduling gate gvirtus.io/backend; when a
// backend can take one, one patch writes its backend annotations and removes the gate.
// Which pods a pass releases, and gangs, are in webhook/release/pass.h.
namespace gvirtus::webhook {

class WebhookMetrics;

// The waiting pods among `pods`, oldest first: by creationTimestamp, then namespace/name.
std::vector<ObjectSnapshot> waitingPods(const std::vector<ObjectSnapshot>& pods);

struct WaitingPodControllerOptions {
  // The webhook's own namespace: its pods are never gated, never touched.
  std::string ownNamespace;
  std::vector<std::string> plugins;  // empty: defaultPlugins()
  // A pass also runs this long after the last one: load reports age and own assignments
  // expire without any event.
  Duration resync = std::chrono::seconds(10);
  // Told after every pass the pods it left waiting for capacity and the backends it saw
  // (the autoscale controller's input). Empty: nobody is told.
  std::function<void(std::vector<CapacityDemand>, BackendSnapshot)> onPassDone;
  // Release patches in flight at once in a pass: a PATCH waits milliseconds for the API
  // server, so one at a time caps releases near 150 pods/s (tests/bench/controller_bench).
  size_t parallelReleases = 8;
  // Every GVirtuS pod, as records (the cluster backend source's store, started by its
  // owner): the gang members already released. Null: run() keeps such a store of its own
  // while it runs.
  GvirtusPodStore* gvirtusPods = nullptr;
};

// Watches the waiting GVirtuS pods (label gvirtus.io/enabled=true, unscheduled, in every
// namespace but the webhook's own), KAI-Scheduler's PodGroups (none without its CRD) and the
// backends, and releases waiting pods in passes: a pass runs on every change of these, and
// at least every `resync`. A pass reads only caches: it sends no GET or LIST. What it
// decided is told by a ReleaseReporter (Events, log, metrics).
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

  // Runs until `stop`: the pod watch and the passes. May run again after it returned.
  void run(std::stop_token stop);

 private:
  // What one run() remembers about the waiting pods, by UID.
  struct RunState {
    // The resourceVersion each released pod was patched from: while the cache still holds
    // that version, the pod is not tried again.
    std::map<std::string, std::string> releasedFrom;
  };
  // One pass; false when a patch failed for another reason than a conflict.
  bool pass(std::stop_token stop, const std::vector<ObjectSnapshot>& pods, RunState& state);
  // The pods a pass left waiting for capacity and the backends it saw, to onPassDone.
  void tellPassDone(const std::vector<PodOutcome>& outcomes, BackendSnapshot backends) const;
  // A pass when a GVirtuS pod of a gang changes: a member released or gone changes what its
  // gang waits for.
  ResourceEventHandlers gangMemberHandlers();
  // The gang of a waiting pod, from its PodGroup and the GVirtuS pods that carry the same
  // annotation but no longer wait (counted once per pass for all gangs, in `released`).
  std::optional<Gang> gangOf(const nlohmann::json& pod,
                             std::optional<std::map<std::string, int>>& released) const;
  void wake();

  KubeClient& client_;
  const BackendSource& backends_;
  BackendChooser& chooser_;
  EventRecorder& events_;
  WebhookMetrics* metrics_;
  WaitingPodControllerOptions options_;
  ReleaseReporter reporter_;
  // While run() runs (set before its controller starts, read by its passes).
  const GvirtusPodStore* gvirtusPods_ = nullptr;
  const ResourceCache* podGroups_ = nullptr;

  std::mutex mutex_;
  std::shared_ptr<Controller> controller_;  // while run() runs
  // Per backend (IP:PORT): the backend as last seen, its load's `updated` and its pods left
  // out (a heartbeat or another pod given it changes nothing), and since when it has been so.
  struct Offer {
    Backend backend;
    std::chrono::system_clock::time_point since;
  };
  std::map<std::string, Offer> offers_;
};

}  // namespace gvirtus::webhook
