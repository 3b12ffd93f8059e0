#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/cache/object_cache.h"
#include "common/controller/event_recorder.h"
#include "common/controller/leader_controller.h"
#include "common/kube/client.h"
#include "common/time/duration.h"
#include "webhook/peers/claim_peers.h"
#include "webhook/pods/backend_loss.h"

// The backend follower (issue 39): GVirtuS pods follow their backend. A pod's
// properties.json names the address it was given at release, and a container restarted
// in the same pod reads the same file: when its backend pod is gone, has a new address, or
// has not been ready for a grace period, the pod must not run on against that address.
//
// What it does, once per pod and backend (webhook/pods/backend_loss.h decides):
// - a pod with a controlling owner (ReplicaSet, Job, StatefulSet, ...) is deleted, with
//   its UID as a precondition, so that the owner creates a new pod; that pod goes through
//   admission and the waiting-pod controller like any other and gets a live backend.
//   Its Event BackendLostRecreated says why.
// - a bare pod, which nothing would recreate, is never deleted: it gets the condition
//   gvirtus.io/BackendLost=True and a Warning Event BackendLost telling its owner to delete
//   it. The condition goes back to False if the backend serves again at the same address.
//
// Why not rewrite the pod's address in place: the kubelet refreshes a projected downward-
// API file on its own schedule, after the pod update reaches it, while a crashed container
// restarts at once the first time. A container restarted in between would read the old
// address. A new pod has its address written before its first container starts (the
// gate is removed in the same patch), so the race cannot be lost.
//
// With --dra (docs/dra.md) the pods labelled gvirtus.io/dra=true that hold a claim follow
// the backend pods their claims' devices belong to, as the scheduler reserved the claims for
// them (webhook/peers/claim_peers.h), and are recreated or marked alike: a recreated pod's new
// claim, made from its template, is allocated a live backend's device. A pod whose lost
// device comes through a claim it names directly (spec.resourceClaims[].resourceClaimName,
// a claim other pods may share) is marked and never deleted: kube-controller-manager
// deallocates such a claim only once no pod is reserved on it, and the scheduler reserves
// a recreated pod on the old allocation while its predecessor terminates, so deleting
// would recreate pods on the lost backend again and again. The device plugin never moves a
// prepared claim: a new pod is the only way to a new address here too. Where the API server
// serves DeviceTaintRules (Kubernetes 1.37), claimants are not deleted or marked by us:
// the lost backend's devices are tainted NoExecute, and kube-controller-manager evicts the
// pods whose claims do not tolerate it (taintLostDevices).
namespace gvirtus::webhook {

class WebhookMetrics;

// The follower's writes, passed as functions so that it runs in a unit test without HTTP.
struct FollowerApi {
  // DELETE of a pod, only if it still has `uid` (a precondition).
  std::function<Result<void>(const std::string& ns, const std::string& name,
                             const std::string& uid)>
      deletePod;
  // A strategic merge patch of a pod's status (its conditions).
  std::function<Result<void>(const std::string& ns, const std::string& name,
                             const std::string& patch)>
      patchStatus;
  // With taintLostDevices: CREATE of a DeviceTaintRule (409 when it exists), DELETE of one by
  // name (404 when it is gone), and the LIST of them all (a new leader adopts the last one's).
  std::function<Result<void>(const nlohmann::json& rule)> createTaintRule;
  std::function<Result<void>(const std::string& name)> deleteTaintRule;
  std::function<Result<std::vector<nlohmann::json>>()> listTaintRules;
};
FollowerApi followerApi(KubeClient& client);

struct BackendFollowerOptions {
  // The backend pods' namespace (--backend-namespace): a pod that names a backend pod
  // elsewhere (an older installation's) is left alone, never taken for one whose backend
  // is gone.
  std::string backendNamespace = "gvirtus-system";
  // How long a backend pod may be not ready (or terminating past its deadline) before its
  // pods are moved: a backend restarted in its pod is back within seconds, and its startup
  // probe allows a minute; a node's brief NotReady (a kubelet restart) is no loss either.
  Duration grace = std::chrono::seconds(90);
  // When at least this many backend pods, and more than half of them, are not ready at
  // once, no pod is moved for a backend that is only not ready: the control plane (node
  // heartbeats that do not arrive) or the network is then far likelier at fault than the
  // backends, and moving every frontend would turn a hiccup into an outage. The node
  // lifecycle controller stops evicting in a zone in full disruption for the same reason.
  // A backend pod gone, or with a new address, is acted on all the same. 0: never hold.
  size_t massNotReady = 10;
  Duration backoffInitial = std::chrono::seconds(1);
  Duration backoffMax = std::chrono::seconds(60);
  std::function<TimePoint()> now;  // default: the system clock
  // Claimants of a lost backend are left to kube-controller-manager: the backend's devices
  // are tainted NoExecute (webhook/dra/device_taint_rule.h), and it evicts the pods whose claims
  // do not tolerate that, bare or not. Where the API server serves DeviceTaintRules
  // (Kubernetes 1.37); off, the follower deletes or marks them itself, as the GVirtuS pods.
  bool taintLostDevices = false;
};

// On the shared controller loop (common/controller/controller.h), one key per GVirtuS pod
// ("namespace/name"). A change of a backend pod (gone, a new address, readiness, deletion)
// queues the pods that follow it; a change of a pod queues that pod; gaining leadership
// queues every pod that follows a backend. Pods are indexed by the backend pod they follow
// on every replica (the handlers run whether or not this one leads).
class BackendFollower {
 public:
  // Adds its handlers to both caches, which must not have started: `backendPods` (the
  // backend pods, whole) and `frontendPods` (the GVirtuS pods, frontendFields()).
  // `events` and `metrics` may be null. All must outlive the follower.
  // With `claimants` (both caches set, not started either), the claimant pods are followed
  // too.
  BackendFollower(ObjectCache& backendPods, ObjectCache& frontendPods, FollowerApi api,
                  EventRecorder* events, WebhookMetrics* metrics,
                  BackendFollowerOptions options = {}, ClaimantCaches claimants = {});

  // The leader's work: runs until `stop`. May run again after it returned.
  void run(std::stop_token stop);

  // Acts on one GVirtuS pod ("namespace/name"), or one claimant pod
  // ("claimant:namespace/name"), as backendLoss() decides; asks to be synced again when the
  // decision waits on time (a grace running out).
  Result<SyncResult> sync(const std::string& pod);
  static constexpr std::string_view kClaimantPrefix = "claimant:";
  // "taint-rule:namespace/name": the DeviceTaintRule of that backend pod, deleted once its
  // backend serves again or no claim is allocated its devices any more.
  static constexpr std::string_view kTaintRulePrefix = "taint-rule:";

 private:
  // followedBackend(), for a backend pod of options_.backendNamespace only.
  std::optional<FollowedBackend> followed(const nlohmann::json& pod) const;
  void frontendChanged(const nlohmann::json* old, const nlohmann::json* now);
  void backendChanged(const nlohmann::json& pod);
  void enqueue(const std::string& pod);
  void enqueueAll();
  // Acts on `loss` for `pod` (`key` its queue key): deleted when it has an owner that
  // recreates it and `recreatable`, marked otherwise, its Event saying `advice`.
  // `servingAgain` is the condition's message when a marked pod's backend serves again.
  Result<SyncResult> act(const nlohmann::json& pod, const std::string& key, const BackendLoss& loss,
                         const std::string& servingAgain, bool recreatable = true,
                         const std::string& advice = kBareAdvice);
  static constexpr const char* kBareAdvice =
      "this pod has no owner to recreate it and its containers keep the old address: delete "
      "it, and create it again for a new backend";
  // The claimant half (backend_follower_claims.cpp).
  void claimChanged(const nlohmann::json& claim, bool gone);
  void claimantChanged(const nlohmann::json& pod, bool gone);
  Result<SyncResult> syncClaimant(const std::string& key);
  // A backend pod (of options_.backendNamespace) that a claimant follows, and through which
  // claim: one it names directly (byName), or one made for it from a template.
  struct ClaimedBackend {
    std::string backendPod;
    std::string claim;
    bool byName = false;
  };
  std::vector<ClaimedBackend> claimedBackends(const nlohmann::json& pod) const;
  bool claimantsSynced() const;
  // The taint half (backend_follower_taints.cpp): the rules of `lost` backend pods, made
  // where missing, and an Event on `pod` once; a rule kept only while it is needed; a new
  // leader's rules are those the API server lists.
  Result<SyncResult> taintLost(const nlohmann::json& pod, const std::vector<std::string>& lost,
                               const BackendLoss& loss);
  Result<SyncResult> syncTaintRule(const std::string& backendPod);
  void adoptTaintRules();
  Result<void> recreate(const nlohmann::json& pod, const std::string& owner,
                        const std::string& why);
  Result<void> setCondition(const nlohmann::json& pod, bool lost, const std::string& reason,
                            const std::string& message);
  TimePoint now() const;
  // The backend pods are mostly not ready at once (options_.massNotReady).
  bool massNotReady() const;

  ObjectCache& backendPods_;
  ObjectCache& frontendPods_;
  const FollowerApi api_;
  EventRecorder* events_;
  WebhookMetrics* metrics_;
  const BackendFollowerOptions options_;
  const ClaimantCaches claimants_;
  LeaderController leader_;

  std::mutex mutex_;
  // By backend pod ("namespace/name"): the GVirtuS pods that follow it.
  std::map<std::string, std::set<std::string>> followers_;
  // By backend pod: (claim, claimant key) of each pod a claim's reservation names, for each
  // of the claim's backend pods; and by claim, (backend pod, claimant key) of what it put
  // there. Read from the claims alone: a sync checks the pod.
  using ClaimEntries = std::set<std::pair<std::string, std::string>>;
  std::map<std::string, ClaimEntries> claimFollowers_;
  std::map<std::string, ClaimEntries> indexedOfClaim_;
  // The UIDs of the pods deleted or marked: until the watch brings the change, a sync does
  // not act on one again. Forgotten when the pod is.
  std::set<std::string> acted_;
  // The backend pods whose DeviceTaintRule this leader made or adopted.
  std::set<std::string> tainted_;
  mutable std::atomic<bool> warnedMass_ = false;
};

}  // namespace gvirtus::webhook
