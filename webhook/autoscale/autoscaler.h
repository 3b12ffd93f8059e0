#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/base/json_patch.h"
#include "common/contract/backend_requirements.h"
#include "common/controller/event_recorder.h"
#include "common/time/duration.h"
#include "webhook/placement/backend.h"

// Backends that follow demand (docs/operations.md, "Autoscaling backends"): the leader
// opts candidate GPU nodes in (gvirtus.io/backend.allowed=true) when GVirtuS pods have
// waited too long for a backend, and opts them out again once their backend has been idle.
// Everything it knows lives on the nodes (the annotations gvirtus.io/autoscaled and
// gvirtus.io/backend.draining), so that a new leader carries on where the last one stopped.
//
// Whose decision a node's label is, from the node alone: the autoscaler's own opt-out sets
// the label to false and removes gvirtus.io/autoscaled in the same patch, so the annotation
// is never left on a node it opted out. With the annotation, the label "true" is the
// autoscaler's; any other value (or none) is an operator's opt-out, which stands: the node
// is never opted in again until an operator removes the annotation (hands it back).
namespace gvirtus::webhook {

using SystemTime = std::chrono::system_clock::time_point;

struct AutoscaleOptions {
  std::string candidates;  // label selector of the GPU nodes it may opt in; empty: off
  int64_t min = 0;         // autoscaled backends kept even when idle
  int64_t max = 1;         // autoscaled backends at most
  Duration scaleUpAfter = std::chrono::seconds(30);
  Duration scaleDownAfter = std::chrono::minutes(10);
  // A node opted out is not opted in again within this long, unless pods that started
  // waiting after it left need it. Default: --scale-down-after.
  std::optional<Duration> cooldown;
  // Sessions a backend that is not running yet is counted for (the backend shim's default
  // --max-sessions), until one reports its own maxSessions.
  int64_t assumedSessions = 16;

  bool enabled() const { return !candidates.empty(); }
  Duration cooldownOrDefault() const { return cooldown.value_or(scaleDownAfter); }
  // How long a draining backend must stay idle before its node is opted out: admissions on
  // other replicas see the draining mark only through their watch.
  Duration drainGrace() const {
    return std::min<Duration>(std::chrono::seconds(15), scaleDownAfter);
  }
};

// A candidate GPU node as its Node object says.
struct CandidateNode {
  std::string name;
  bool optedIn = false;                  // gvirtus.io/backend.allowed=true
  std::optional<SystemTime> autoscaled;  // gvirtus.io/autoscaled: opted in by us, and when
  bool marked = false;                   // carries gvirtus.io/autoscaled, whatever its text
  std::optional<SystemTime> draining;    // gvirtus.io/backend.draining
  std::optional<int64_t> gpus;           // nvidia.com/gpu.count, else capacity nvidia.com/gpu
  std::optional<int64_t> gpuMemoryMiB;   // nvidia.com/gpu.memory (per GPU)
  std::string zone;                      // topology.kubernetes.io/zone
  nlohmann::json object;                 // the Node, to build patches against

  // Opted in by us and not changed since by an operator: the only nodes we ever opt out.
  bool ours() const { return optedIn && autoscaled.has_value(); }
  // Opted in by us, then opted out by an operator (the label changed, our annotation kept):
  // never opted in again while it says so.
  bool heldByOperator() const { return !optedIn && marked; }
};
CandidateNode candidateFromNode(const nlohmann::json& node);

// A GVirtuS pod that waits because no backend can take it (not an incomplete gang, not a
// bad annotation): what a new backend would have to offer it.
struct CapacityDemand {
  ObjectReference pod;
  BackendRequirements requirements;
  SystemTime waitingSince;  // its creation: pods are gated when they are created
};

// What the demand asks of the candidates now.
struct ScaleUpPlan {
  std::vector<std::string> optIn;                     // nodes to opt in, in order
  std::vector<std::string> undrain;                   // draining nodes the demand needs back
  std::map<std::string, std::vector<size_t>> podsOf;  // node -> indexes of the demand it serves
  int64_t wanted = 0;   // backends the ready ones plus the demand need, whatever max allows
  size_t unserved = 0;  // pods no candidate within max can take
};

// Plans a scale-up for the demand that is due (waited at least scaleUpAfter), oldest first:
// each pod goes to a backend that is on its way (an autoscaled node whose backend is not
// ready yet, a draining one) when one fits, else to a new candidate that can meet it (GPUs,
// GPU memory) while fewer than `max` are autoscaled; `min` is reached even without demand.
// `backends` are the backends offered now (a node with one is not on its way); a node in
// `coolingDown` (name -> when it was opted out) is a candidate again after the cooldown, or
// for a pod that started waiting after it left; a node an operator opted out
// (heldByOperator()) is never a candidate.
ScaleUpPlan planScaleUp(const std::vector<CapacityDemand>& due,
                        const std::vector<CandidateNode>& candidates,
                        const std::vector<Backend>& backends,
                        const std::map<std::string, SystemTime>& coolingDown, SystemTime now,
                        const AutoscaleOptions& options);

// The node patches, each guarded by `test` operations so that a node changed meanwhile
// (by an operator, by another replica) refuses it whole.
JsonPatch optInPatch(const CandidateNode& node, SystemTime now);
JsonPatch drainPatch(const CandidateNode& node, SystemTime now);
JsonPatch undrainPatch(const CandidateNode& node);
JsonPatch optOutPatch(const CandidateNode& node);

// How the autoscaler acts on the cluster; tests give fakes.
struct AutoscalerActions {
  // Patches a node; the node as written.
  std::function<Result<nlohmann::json>(const std::string& node, const JsonPatch& patch)> patchNode;
  // GVirtuS pods given this backend (gvirtus.io/backend-pod) that have not finished.
  std::function<Result<int64_t>(const Backend& backend)> assignedPods;
  std::function<void(const ObjectReference& object, const std::string& reason,
                     const std::string& message)>
      event;
  std::function<SystemTime()> now;
};

// What the autoscaler did and wants, for metrics and tests.
struct AutoscaleStatus {
  int64_t wanted = 0;      // backends the demand needs (an external autoscaler's target)
  int64_t autoscaled = 0;  // nodes opted in by us
  int64_t waiting = 0;     // pods waiting for capacity
  int64_t due = 0;         // of them, waiting past --scale-up-after
  int64_t backends = 0;    // backends offered
  int64_t optedIn = 0;     // nodes opted in by this step
  int64_t optedOut = 0;    // nodes opted out by this step
  int64_t held = 0;        // candidates an operator opted out: left alone

  bool operator==(const AutoscaleStatus&) const = default;
};

// The leader's autoscaler: one step() after each tell of the waiting-pod controller's
// parked demand (webhook/autoscale/controller.h), and on a candidate node's change. Its memory
// (since when a backend is idle, which nodes left and when) is a cache of what the nodes
// say; a new leader rebuilds it from them.
class BackendAutoscaler {
 public:
  BackendAutoscaler(AutoscaleOptions options, AutoscalerActions actions);

  const AutoscaleOptions& options() const { return options_; }

  // One look at the candidates, the backends offered now and the pods waiting for capacity.
  // Returns how soon the next look is needed at the latest (a pod becoming due, a drain's
  // grace ending, an idle window closing); nullopt when nothing is pending.
  std::optional<Duration> step(const std::vector<nlohmann::json>& candidateNodes,
                               const std::vector<Backend>& backends,
                               const std::vector<CapacityDemand>& demand);

  const AutoscaleStatus& status() const { return status_; }
  // A new leadership term: what was remembered may be stale.
  void reset();

 private:
  // The candidates as the cache shows them, or as we last wrote them while the cache still
  // shows the version we wrote over; by name. Forgets what is gone or cooled down.
  std::vector<CandidateNode> currentCandidates(const std::vector<nlohmann::json>& candidateNodes,
                                               SystemTime now);
  // The plan's undrains and opt-ins written, each with its Events.
  void scaleUp(std::vector<CandidateNode>& nodes, const ScaleUpPlan& plan,
               const std::vector<CapacityDemand>& due, SystemTime now);
  void scaleDown(std::vector<CandidateNode>& nodes, const std::vector<Backend>& backends,
                 const ScaleUpPlan& plan, SystemTime now, std::optional<Duration>& next);
  // An autoscaled node idle for --scale-down-after, and above the floor, starts draining.
  void drainIfIdle(CandidateNode& node, const Backend* backend, SystemTime now, int64_t& staying,
                   std::optional<Duration>& next);
  // A draining node past its grace, with no pod given its backend, is opted out.
  void optOutIfDrained(CandidateNode& node, const Backend* backend, SystemTime now,
                       std::optional<Duration>& next);
  // The pods given the node's backend (0 without one); nullopt, logged, when not known.
  std::optional<int64_t> podsGiven(const CandidateNode& node, const Backend* backend);
  void recordStatus(const std::vector<CandidateNode>& nodes, const ScaleUpPlan& plan);
  bool write(CandidateNode& node, const JsonPatch& patch, const char* what);
  void nodeEvent(const CandidateNode& node, const std::string& reason, const std::string& message);

  AutoscaleOptions options_;
  AutoscalerActions actions_;
  AutoscaleStatus status_;
  // The last status logged: a look is logged (debug) only when it differs.
  std::optional<AutoscaleStatus> logged_;
  // Nodes as we last wrote them, by name, with the resourceVersion they were written over:
  // while the cache still shows that version, ours stands in for it.
  struct Written {
    std::string over;
    nlohmann::json node;
  };
  std::map<std::string, Written> written_;
  std::map<std::string, SystemTime> idleSince_;
  std::map<std::string, SystemTime> optedOut_;
};

}  // namespace gvirtus::webhook
