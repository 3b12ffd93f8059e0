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

#include "common/controller.h"
#include "common/duration.h"
#include "common/error.h"
#include "common/event_recorder.h"
#include "common/json_patch.h"
#include "common/kube_client.h"
#include "common/resource_cache.h"
#include "webhook/backend_autoscaler.h"
#include "webhook/backend_chooser.h"
#include "webhook/backend_source.h"
#include "webhook/pod_wiring.h"

// The waiting-pod controller (docs/pod-contract.md): GVirtuS pods admitted
// while no backend could take them carry the scheduling gate gvirtus.io/backend; when a
// backend can take one, one patch writes its backend annotations and removes the gate.
namespace gvirtus::webhook {

class WebhookMetrics;

// Event reasons on the pod.
inline constexpr const char* kWaitingForBackendReason = "WaitingForBackend";
inline constexpr const char* kBackendAssignedReason = "BackendAssigned";
// A Warning: the pod carries the gate gvirtus.io/backend, but the webhook did not wire it.
inline constexpr const char* kNotWiredReason = "NotWiredByWebhook";

// A pod waits while it carries the gate gvirtus.io/backend and is not being deleted.
bool isWaiting(const nlohmann::json& pod);

// Copies of the waiting pods among `pods` (the others are not copied), oldest first: by
// creationTimestamp, then namespace/name.
std::vector<nlohmann::json> waitingPods(const std::vector<ObjectSnapshot>& pods);

// The patch that releases a waiting pod: what assignBackend() changes on a copy of it
// (backend annotations; gate and waiting status removed), behind `test` operations on the pod's
// resourceVersion and on the gate at its index, so that on a pod changed since it was read
// (released by another replica, a gate list reordered) the API server refuses the whole patch
// instead of applying it.
JsonPatch releasePatch(const nlohmann::json& pod, const Assignment& assignment);

// True for a refused release patch that means the pod changed meanwhile: 409, or 422 from a
// failed `test` operation.
bool isReleaseConflict(const Error& error);

// What one pass did with one waiting pod.
struct PodOutcome {
  // Refused: gated, but not by the webhook (gatedByWebhook() is false); never released.
  enum class Kind { Released, Waiting, Failed, Refused };
  Kind kind = Kind::Waiting;
  nlohmann::json pod;                        // as the pass read it
  std::optional<Choice> choice;              // Released: the backend given
  std::string reason;                        // Waiting, Refused: why it is not released
  bool forCapacity = false;                  // Waiting: because no backend has room for it
  std::optional<Error> error;                // Failed: the patch's error
  std::chrono::system_clock::time_point at;  // Released: when the patch succeeded
};

// Writes one release patch to one pod.
using ReleaseWriter =
    std::function<Result<void>(const nlohmann::json& pod, const JsonPatch& patch)>;

// A gang: the waiting pods of one KAI PodGroup whose minMember is more than 1. KAI binds
// such a group only whole, so its pods are released together or not at all: a released
// member would hold a backend session for a pod that cannot run yet.
struct Gang {
  std::string name;   // namespace/PodGroup
  int minMember = 1;  // from the PodGroup
  int others = 0;     // members that no longer wait (released earlier)
};
// The gang of a waiting pod; nullopt for a pod that goes alone (no PodGroup annotation,
// no such PodGroup, minMember 1).
using GangLookup = std::function<std::optional<Gang>(const nlohmann::json& pod)>;

// One pass over waiting pods, in the given order (oldest first): the chooser picks a
// backend for each and records it (confirmed: the pod exists), so that the next pod sees
// it taken (never more pods than a backend's capacity), and `write` releases the pod; a
// failed write gives the backend back. A pod the webhook did not wire and gate at
// admission (gatedByWebhook()) is refused: it is given no backend and keeps its gate. A
// pod no backend can take waits and the next one is tried. The waiting members of a gang
// (`gangOf`) go at the place of their oldest member, all of them or none: when fewer than
// minMember exist, or not all of them can get a backend, they all wait with that reason
// and give back what was chosen for them. Stops early when `stop` is requested.
//
// The writes go `parallelWrites` at a time (each waits for the API server, not for the
// others): the choices for that many pods are made, their writes run together, and the
// backends of failed ones are given back before the next pods are chosen. With 1, each
// pod is written before the next is chosen. `write` must then be safe to call from several
// threads.
std::vector<PodOutcome> releaseWaitingPods(
    const std::vector<nlohmann::json>& waiting, const std::vector<Backend>& backends,
    BackendChooser& chooser, const std::vector<std::string>& plugins, const ReleaseWriter& write,
    std::stop_token stop = {}, const GangLookup& gangOf = {}, size_t parallelWrites = 1);

struct WaitingPodControllerOptions {
  // The webhook's own namespace: its pods are never gated, never touched.
  std::string ownNamespace;
  std::vector<std::string> plugins;  // empty: defaultPlugins()
  // A pass also runs this long after the last one: load reports age and own assignments
  // expire without any event.
  Duration resync = std::chrono::seconds(10);
  // Candidate GPU nodes opted in and out as pods wait (off without candidates).
  AutoscaleOptions autoscale;
  // Release patches in flight at once in a pass: a PATCH waits milliseconds for the API
  // server, so one at a time caps releases near 150 pods/s (tests/bench/controller_bench).
  size_t parallelReleases = 8;
};

// Watches the waiting GVirtuS pods (label gvirtus.io/enabled=true, unscheduled, in every
// namespace but the webhook's own) and the backends, and releases waiting pods in passes:
// a pass runs on every change of either, and at least every `resync`. Records the Events
// WaitingForBackend (once per pod and reason; withdrawn when the pod is released before it
// was written) and BackendAssigned on the pods, and NotWiredByWebhook (a Warning, once per
// pod) on a gated pod the webhook never wired, which it leaves gated.
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
    // The reasons a pod was already told (WaitingForBackend once per pod and reason).
    std::map<std::string, std::vector<std::string>> told;
    // The resourceVersion each released pod was patched from: while the cache still holds
    // that version, the pod is not tried again.
    std::map<std::string, std::string> releasedFrom;
    // When the autoscaler wants its next look, at the latest.
    std::optional<Duration> nextLook;
  };
  // One pass; false when a patch failed for another reason than a conflict. `candidates`:
  // the autoscaler's candidate nodes (empty without it).
  bool pass(std::stop_token stop, const std::vector<ObjectSnapshot>& pods,
            const std::vector<nlohmann::json>& candidates, RunState& state);
  // One step of the autoscaler after a pass's outcomes.
  void autoscale(const std::vector<PodOutcome>& outcomes,
                 const std::vector<nlohmann::json>& candidates, RunState& state);
  // GVirtuS pods given `backend` that have not finished (autoscaler's idle check).
  Result<int64_t> assignedPods(const Backend& backend);
  void report(const PodOutcome& outcome, RunState& state);
  // The gang of a waiting pod, from its PodGroup (read once per pass) and the pods of its
  // namespace that carry the same annotation but no longer wait.
  std::optional<Gang> gangOf(const nlohmann::json& pod,
                             std::map<std::string, std::optional<Gang>>& seen);
  void wake();

  KubeClient& client_;
  const BackendSource& backends_;
  BackendChooser& chooser_;
  EventRecorder& events_;
  WebhookMetrics* metrics_;
  WaitingPodControllerOptions options_;
  std::unique_ptr<BackendAutoscaler> autoscaler_;  // with --autoscale-candidates

  std::mutex mutex_;
  std::shared_ptr<Controller> controller_;  // while run() runs
  // Per backend (IP:PORT): the backend as last seen, its load's `updated` left out (a
  // heartbeat changes nothing), and since when it has been so.
  struct Offer {
    Backend backend;
    std::chrono::system_clock::time_point since;
  };
  std::map<std::string, Offer> offers_;
};

}  // namespace gvirtus::webhook
