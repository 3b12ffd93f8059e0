// The backend follower's claimant half (--dra, docs/dra.md): which pods holding a claim
// follow which backend pods, and the sync of one such pod. What is lost and what is done
// about it are the GVirtuS pods' (follower.cpp).
#include <algorithm>
#include <vector>

#include "common/base/json_access.h"
#include "common/contract/pod_status.h"
#include "common/kube/api/resource.h"
#include "common/time/time_text.h"
#include "webhook/follower/follower.h"

namespace gvirtus::webhook {

using nlohmann::json;

bool BackendFollower::claimantsSynced() const {
  return claimants_.claims == nullptr || claimants_.pods == nullptr ||
         (claimants_.claims->hasSynced() && claimants_.pods->hasSynced());
}

void BackendFollower::claimChanged(const json& claim, bool gone) {
  const std::string claimKey = cacheKey(claim);
  const std::string ns = stringAt(claim, {"metadata", "namespace"});
  // (backend pod, claimant key) for every pod reserved, for every backend pod of ours.
  ClaimEntries wanted;
  const ClaimPeers peers = claimPeers(claim);
  if (!gone) {
    for (const auto& backendPod : peers.backendPods) {
      if (!backendPod.starts_with(options_.backendNamespace + "/")) {
        continue;
      }
      for (const auto& reservation : peers.reservedFor) {
        wanted.emplace(backendPod, std::string(kClaimantPrefix) + ns + "/" + reservation.pod);
      }
    }
  }
  std::set<std::string> changed;
  {
    std::lock_guard lock(mutex_);
    ClaimEntries& held = indexedOfClaim_[claimKey];
    for (const auto& [backendPod, claimant] : held) {
      if (wanted.contains({backendPod, claimant})) {
        continue;
      }
      if (auto it = claimFollowers_.find(backendPod); it != claimFollowers_.end()) {
        it->second.erase({claimKey, claimant});
        if (it->second.empty()) {
          claimFollowers_.erase(it);
        }
      }
      changed.insert(claimant);
    }
    for (const auto& [backendPod, claimant] : wanted) {
      if (claimFollowers_[backendPod].insert({claimKey, claimant}).second) {
        changed.insert(claimant);
      }
    }
    if (wanted.empty()) {
      indexedOfClaim_.erase(claimKey);
    } else {
      held = std::move(wanted);
    }
    // A claim on a tainted backend changed or went: is the taint needed still?
    for (const auto& backendPod : peers.backendPods) {
      if (tainted_.contains(backendPod)) {
        changed.insert(std::string(kTaintRulePrefix) + backendPod);
      }
    }
  }
  for (const auto& claimant : changed) {
    enqueue(claimant);
  }
}

void BackendFollower::claimantChanged(const json& pod, bool gone) {
  if (gone) {
    std::lock_guard lock(mutex_);
    acted_.erase(stringAt(pod, {"metadata", "uid"}));
    return;
  }
  // Its claim's events may have come first, while the pod was not cached; any change of
  // the pod (most are status updates) costs one look at a few cached objects.
  enqueue(std::string(kClaimantPrefix) + cacheKey(pod));
}

std::vector<BackendFollower::ClaimedBackend> BackendFollower::claimedBackends(
    const json& pod) const {
  const std::string ns = stringAt(pod, {"metadata", "namespace"});
  std::vector<ClaimedBackend> backends;
  for (const auto& claimName : claimNames(pod)) {
    const ObjectSnapshot claim = claimants_.claims->get(ns, claimName);
    if (!claim) {
      continue;
    }
    const ClaimPeers peers = claimPeers(*claim);
    const bool reserved = std::any_of(peers.reservedFor.begin(), peers.reservedFor.end(),
                                      [&](const ClaimReservation& reservation) {
                                        return holdsReservation(pod, reservation, claimName);
                                      });
    if (!reserved) {
      continue;
    }
    // Named in the spec: a claim of its own standing. Otherwise the claim controller made it
    // for this pod from a template, and named it in the status only.
    const json* named = memberAt(pod, {"spec", "resourceClaims"});
    const bool byName = named != nullptr && named->is_array() &&
                        std::any_of(named->begin(), named->end(), [&](const json& entry) {
                          return stringAt(entry, {"resourceClaimName"}) == claimName;
                        });
    for (const auto& backendPod : peers.backendPods) {
      if (backendPod.starts_with(options_.backendNamespace + "/")) {
        backends.push_back({backendPod, claimName, byName});
      }
    }
  }
  return backends;
}

Result<SyncResult> BackendFollower::syncClaimant(const std::string& key) {
  if (claimants_.claims == nullptr || claimants_.pods == nullptr) {
    return SyncResult{};
  }
  const auto [ns, name] = splitCacheKey(key.substr(kClaimantPrefix.size()));
  const ObjectSnapshot pod = claimants_.pods->get(ns, name);
  if (!pod) {
    return SyncResult{};
  }
  // A pod the webhook gave a backend itself follows that one (sync()), and only that one:
  // two decisions on one pod would take each other's condition back.
  if (const ObjectSnapshot wired = frontendPods_.get(ns, name); wired && followed(*wired)) {
    return SyncResult{};
  }
  const std::vector<ClaimedBackend> backends = claimedBackends(*pod);
  if (backends.empty()) {
    return SyncResult{};  // not reserved (yet, or any more), finished or being deleted
  }
  // The worst of its backends decides: one gone, then one not ready past the grace, then
  // the soonest a grace runs out.
  const TimePoint at = now();
  const TimePoint created =
      parseRfc3339(stringAt(*pod, {"metadata", "creationTimestamp"})).value_or(TimePoint{});
  auto rank = [](BackendLoss::Kind kind) {
    switch (kind) {
      case BackendLoss::Kind::kGone:
        return 0;
      case BackendLoss::Kind::kNotReady:
        return 1;
      case BackendLoss::Kind::kWaiting:
        return 2;
      case BackendLoss::Kind::kServing:
        break;
    }
    return 3;
  };
  BackendLoss worst;
  // A lost device of a claim the pod names itself: recreating the pod would not help.
  const ClaimedBackend* lostByName = nullptr;
  std::vector<std::string> lost;  // the backend pods gone, or not ready past the grace
  for (const auto& claimed : backends) {
    const auto [backendNs, backendName] = splitCacheKey(claimed.backendPod);
    const ObjectSnapshot backend = backendPods_.get(backendNs, backendName);
    BackendLoss loss = backendLoss(FollowedBackend{claimed.backendPod, ""}, backend.get(), created,
                                   at, options_.grace);
    if (rank(loss.kind) <= 1) {
      lost.push_back(claimed.backendPod);
    }
    if (claimed.byName && lostByName == nullptr && rank(loss.kind) <= 1) {
      lostByName = &claimed;
    }
    if (rank(loss.kind) < rank(worst.kind) ||
        (loss.kind == worst.kind && loss.kind == BackendLoss::Kind::kWaiting &&
         *loss.recheckAt < *worst.recheckAt)) {
      worst = std::move(loss);
    }
  }
  std::string listed;
  for (const auto& claimed : backends) {
    listed += (listed.empty() ? "" : ", ") + claimed.backendPod;
  }
  const std::string servingAgain = "backend pod " + listed + " serves again";
  // Tainted, the eviction is kube-controller-manager's, for pods whose claims do not
  // tolerate it. Most backends not ready at once hold it, as for the other path (act()).
  if (options_.taintLostDevices && !lost.empty() &&
      (worst.kind == BackendLoss::Kind::kGone || !massNotReady())) {
    return taintLost(*pod, lost, worst);
  }
  if (lostByName == nullptr) {
    return act(*pod, key, worst, servingAgain);
  }
  worst.why +=
      " (claim " + lostByName->claim + " holds backend pod " + lostByName->backendPod + ")";
  return act(*pod, key, worst, servingAgain, false,
             "the claim is named by the pod and may be shared: it is allocated again only once "
             "no pod uses it, so delete every pod that uses it (or scale their owner to 0 and "
             "back)");
}

}  // namespace gvirtus::webhook
