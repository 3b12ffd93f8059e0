// The backend follower's taint half (Kubernetes 1.37, taintLostDevices): a lost backend's
// devices are tainted NoExecute through a DeviceTaintRule, and kube-controller-manager's
// device taint eviction controller deletes the pods whose claims do not tolerate the taint
// (condition DisruptionTarget, reason DeletionByDeviceTaintManager); their owners make new
// pods, whose new claims the scheduler allocates on live backends. The rule is deleted once
// the backend serves again or no claim is allocated its devices.
#include <algorithm>
#include <string>
#include <vector>

#include "common/base/json_access.h"
#include "common/contract/pod_status.h"
#include "common/kube/api/resource.h"
#include "common/telemetry/log.h"
#include "webhook/base/metrics.h"
#include "webhook/base/names.h"
#include "webhook/dra/device_taint_rule.h"
#include "webhook/follower/follower.h"

namespace gvirtus::webhook {

using nlohmann::json;

Result<SyncResult> BackendFollower::taintLost(const json& pod, const std::vector<std::string>& lost,
                                              const BackendLoss& loss) {
  std::string rules;
  for (const auto& backendPod : lost) {
    const std::string name = lostRuleName(backendPod);
    rules += (rules.empty() ? "" : ", ") + name;
    {
      std::lock_guard lock(mutex_);
      if (tainted_.contains(backendPod)) {
        continue;
      }
    }
    const auto [backendNs, backendName] = splitCacheKey(backendPod);
    const char* why = backendPods_.get(backendNs, backendName) ? "not-ready" : "gone";
    if (auto created = api_.createTaintRule(lostBackendRule(backendPod, why));
        !created && !created.error().isConflict()) {
      if (metrics_ != nullptr) {
        metrics_->backendLost("failed");
      }
      return fail(created.error().context("create DeviceTaintRule " + name));
    }
    {
      std::lock_guard lock(mutex_);
      tainted_.insert(backendPod);
    }
    log::warn("a backend pod is lost: its devices are tainted NoExecute",
              {{"backendPod", backendPod}, {"rule", name}, {"why", loss.why}});
  }
  {
    std::lock_guard lock(mutex_);
    if (!acted_.insert(stringAt(pod, {"metadata", "uid"})).second) {
      return SyncResult{};  // told before
    }
  }
  if (metrics_ != nullptr) {
    metrics_->backendLost("tainted");
  }
  if (events_ != nullptr) {
    events_->record(referenceTo(pod, "v1", "Pod"), EventType::Warning, names::kBackendLostReason,
                    loss.why + "; its devices are tainted " + kBackendLostTaintKey +
                        ":NoExecute (DeviceTaintRule " + rules +
                        "): kube-controller-manager evicts this pod unless its claim tolerates "
                        "the taint");
  }
  return SyncResult{};
}

Result<SyncResult> BackendFollower::syncTaintRule(const std::string& backendPod) {
  {
    std::lock_guard lock(mutex_);
    if (!tainted_.contains(backendPod)) {
      return SyncResult{};
    }
  }
  // Allocated, reserved or not: a claim named by pods (resourceClaimName) keeps its
  // allocation until none is reserved on it, and a pod reserved on it then must find the
  // device tainted still. Rules are few and short-lived: the cached claims are read whole.
  bool held = false;
  for (const auto& claim :
       claimants_.claims != nullptr ? claimants_.claims->list() : std::vector<ObjectSnapshot>{}) {
    const ClaimPeers peers = claimPeers(*claim);
    if (std::find(peers.backendPods.begin(), peers.backendPods.end(), backendPod) !=
        peers.backendPods.end()) {
      held = true;
      break;
    }
  }
  const auto [ns, name] = splitCacheKey(backendPod);
  const ObjectSnapshot backend = backendPods_.get(ns, name);
  const bool serving = backend && podReady(*backend) &&
                       memberAt(*backend, {"metadata", "deletionTimestamp"}) == nullptr;
  if (held && !serving) {
    return SyncResult{};
  }
  const std::string rule = lostRuleName(backendPod);
  if (auto deleted = api_.deleteTaintRule(rule); !deleted && !deleted.error().isNotFound()) {
    return fail(deleted.error().context("delete DeviceTaintRule " + rule));
  }
  {
    std::lock_guard lock(mutex_);
    tainted_.erase(backendPod);
  }
  log::info("a lost backend's taint is taken back",
            {{"backendPod", backendPod},
             {"rule", rule},
             {"why", serving ? "it serves again" : "no claim is allocated its devices any more"}});
  return SyncResult{};
}

void BackendFollower::adoptTaintRules() {
  auto rules = api_.listTaintRules();
  if (!rules) {
    // Its rules stay until this replica leads again; the pods they evicted are gone anyway.
    log::warn(
        "cannot list the DeviceTaintRules of lost backends: those a previous leader made "
        "are kept until the next leader",
        {{"error", rules.error().message}});
    return;
  }
  std::vector<std::string> adopted;
  {
    std::lock_guard lock(mutex_);
    tainted_.clear();
    for (const json& rule : *rules) {
      if (std::string backendPod = ruleBackendPod(rule); !backendPod.empty()) {
        tainted_.insert(backendPod);
        adopted.push_back(std::move(backendPod));
      }
    }
  }
  for (const auto& backendPod : adopted) {
    enqueue(std::string(kTaintRulePrefix) + backendPod);
  }
}

}  // namespace gvirtus::webhook
