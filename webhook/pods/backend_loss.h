#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/time/duration.h"

// Whether a GVirtuS pod has lost its backend (issue 39): the decision behind the backend
// follower (webhook/follower/follower.h), pure so that it is tested without a cluster.
namespace gvirtus::webhook {

using TimePoint = std::chrono::system_clock::time_point;

// What a released GVirtuS pod was given: the backend pod ("namespace/name") and the address
// written into its properties.json. A DRA claimant's (webhook/peers/claim_peers.h) has no
// address: its claim records the device's pool, which names the backend pod, and not the
// slice's address, so any address of that pod is the one it was given. The backend pods
// are a DaemonSet's, whose names are never reused.
struct FollowedBackend {
  std::string backendPod;
  std::string ip;

  bool operator==(const FollowedBackend&) const = default;
};

// The backend a pod follows, when it has one to lose: labelled gvirtus.io/enabled=true;
// released (no scheduling gate gvirtus.io/backend); given a backend pod and an address by
// the webhook; not finished; not being deleted. nullopt otherwise (a static backend names
// no pod: nothing to follow).
std::optional<FollowedBackend> followedBackend(const nlohmann::json& pod);

struct BackendLoss {
  enum class Kind {
    kServing,   // ready at the address the pod was given: nothing to do
    kWaiting,   // not ready or draining, within its grace: look again at `recheckAt`
    kGone,      // no such pod, another address, or stuck terminating
    kNotReady,  // not ready for longer than the grace
  };
  Kind kind = Kind::kServing;
  std::string why;  // for Events and conditions: "backend pod gvirtus-system/b-1 is gone"
  std::optional<TimePoint> recheckAt;
};

// Decides on `backend` (the cache's backend pod, null when there is none of that name) for a
// pod that was given `followed` and created at `created`, at `now`:
// - absent, or at another address than the pod was given (when it names one): gone at once. A new
// pod that
//   took the name (a StatefulSet's) or an address reused by another pod serve other
//   sessions; the pod's properties.json names neither. Absent only counts once the pod
//   is kAbsentSettle old: either webhook replica admits pods, and the leader's cache may
//   not have listed a backend pod the other replica just gave out.
// - being deleted (a DaemonSet rollout, a node drain): its shim drains, and its sessions
//   run until they end or --drain-timeout; the pods are left alone until it is gone, or
//   `grace` past its deletion deadline (a lost node's pod stays terminating forever).
// - not ready (no address yet, the backend restarting in its pod): lost once it has been
//   so for `grace` (since the Ready condition's lastTransitionTime). A backend back at the
//   same address within the grace keeps its sessions; nothing is moved.
inline constexpr Duration kAbsentSettle = std::chrono::seconds(10);
BackendLoss backendLoss(const FollowedBackend& followed, const nlohmann::json* backend,
                        TimePoint created, TimePoint now, Duration grace);

// The pod's controlling owner ("ReplicaSet web-5d8f") when it is one of the workload
// controllers that create a new pod when one of theirs is deleted (apps/v1 ReplicaSet,
// StatefulSet and DaemonSet, batch/v1 Job, v1 ReplicationController); empty otherwise. An
// Argo Workflow, a Spark driver or a Job of another API group (Volcano's) owns its pods
// too, but does not replace them: such a pod counts as bare.
std::string controllingOwner(const nlohmann::json& pod);

// What the caches keep of a pod's owners for controllingOwner(): that one owner (kind, name,
// controller), or null.
nlohmann::json compactOwners(const nlohmann::json& pod);

// The status of the pod's condition gvirtus.io/BackendLost ("True", "False"), empty when it
// has none.
std::string backendLostCondition(const nlohmann::json& pod);

}  // namespace gvirtus::webhook
