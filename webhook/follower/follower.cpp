#include "webhook/follower/follower.h"

#include <vector>

#include "common/base/json_access.h"
#include "common/contract/dra_names.h"
#include "common/kube/api/resource.h"
#include "common/telemetry/log.h"
#include "common/time/time_text.h"
#include "webhook/base/metrics.h"
#include "webhook/base/names.h"
#include "webhook/dra/slice.h"
#include "webhook/pods/pod_fields.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// Deletes to different pods go this many at a time: a backend with hundreds of pods is
// left behind in seconds, within the client's rate limit.
constexpr int kWorkers = 4;
constexpr auto kSyncPoll = std::chrono::milliseconds(200);

// What of a backend pod decides for its pods: a load report (every few seconds) does not.
struct BackendFacts {
  std::string ip;
  bool ready = false;
  bool deleting = false;
  bool operator==(const BackendFacts&) const = default;
};

BackendFacts factsOf(const json& pod) {
  return {podIpv4(pod), podReady(pod), memberAt(pod, {"metadata", "deletionTimestamp"}) != nullptr};
}

}  // namespace

FollowerApi followerApi(KubeClient& client) {
  FollowerApi api;
  api.deletePod = [&client](const std::string& ns, const std::string& name,
                            const std::string& uid) {
    return client.remove(resources::kPods, ns, name, uid);
  };
  api.patchStatus = [&client](const std::string& ns, const std::string& name,
                              const std::string& patch) -> Result<void> {
    WriteOptions status;
    status.subresource = "status";
    auto patched =
        client.patch(resources::kPods, ns, name, PatchType::StrategicMerge, patch, status);
    if (!patched) {
      return fail(patched.error());
    }
    return {};
  };
  api.createTaintRule = [&client](const json& rule) -> Result<void> {
    if (auto created = client.create(dra::kDeviceTaintRules, "", rule); !created) {
      return fail(created.error());
    }
    return {};
  };
  api.deleteTaintRule = [&client](const std::string& name) {
    return client.remove(dra::kDeviceTaintRules, "", name);
  };
  api.listTaintRules = [&client]() -> Result<std::vector<json>> {
    ListOptions mine;
    mine.labelSelector = std::string(kManagedByLabel) + "=" + kManagedBy;
    auto page = client.listAll(dra::kDeviceTaintRules, "", mine);
    if (!page) {
      return fail(page.error());
    }
    return std::move(page->items);
  };
  return api;
}

BackendFollower::BackendFollower(ObjectCache& backendPods, ObjectCache& frontendPods,
                                 FollowerApi api, EventRecorder* events, WebhookMetrics* metrics,
                                 BackendFollowerOptions options, ClaimantCaches claimants)
    : backendPods_(backendPods),
      frontendPods_(frontendPods),
      api_(std::move(api)),
      events_(events),
      metrics_(metrics),
      options_(std::move(options)),
      claimants_(claimants),
      leader_(ControllerOptions{.name = "backend-follower",
                                .workers = kWorkers,
                                .backoffInitial = options_.backoffInitial,
                                .backoffMax = options_.backoffMax,
                                .syncPoll = kSyncPoll},
              [this](const std::string& pod) { return sync(pod); }) {
  frontendPods_.addHandlers(
      {.onAdd = [this](const json& pod) { frontendChanged(nullptr, &pod); },
       .onUpdate = [this](const json& old, const json& now) { frontendChanged(&old, &now); },
       .onDelete = [this](const json& pod) { frontendChanged(&pod, nullptr); }});
  backendPods_.addHandlers({.onAdd = [this](const json& pod) { backendChanged(pod); },
                            .onUpdate =
                                [this](const json& old, const json& now) {
                                  if (factsOf(old) != factsOf(now)) {
                                    backendChanged(now);
                                  }
                                },
                            .onDelete = [this](const json& pod) { backendChanged(pod); }});
  if (claimants_.claims != nullptr && claimants_.pods != nullptr) {
    claimants_.claims->addHandlers(
        {.onAdd = [this](const json& claim) { claimChanged(claim, false); },
         .onUpdate = [this](const json&, const json& now) { claimChanged(now, false); },
         .onDelete = [this](const json& claim) { claimChanged(claim, true); }});
    claimants_.pods->addHandlers(
        {.onAdd = [this](const json& pod) { claimantChanged(pod, false); },
         .onUpdate = [this](const json&, const json& now) { claimantChanged(now, false); },
         .onDelete = [this](const json& pod) { claimantChanged(pod, true); }});
  }
}

bool BackendFollower::massNotReady() const {
  if (options_.massNotReady == 0) {
    return false;
  }
  size_t all = 0, notReady = 0;
  for (const auto& pod : backendPods_.list()) {
    ++all;
    notReady += podReady(*pod) ? 0 : 1;
  }
  const bool mass = notReady >= options_.massNotReady && 2 * notReady > all;
  if (!mass) {
    warnedMass_.store(false);  // warned again the next time
  }
  return mass;
}

TimePoint BackendFollower::now() const {
  return options_.now ? options_.now() : std::chrono::system_clock::now();
}

std::optional<FollowedBackend> BackendFollower::followed(const json& pod) const {
  auto followed = followedBackend(pod);
  if (!followed || !followed->backendPod.starts_with(options_.backendNamespace + "/")) {
    return std::nullopt;
  }
  return followed;
}

void BackendFollower::frontendChanged(const json* old, const json* now) {
  auto before = old != nullptr ? followed(*old) : std::nullopt;
  auto after = now != nullptr ? followed(*now) : std::nullopt;
  const std::string pod = cacheKey(now != nullptr ? *now : *old);
  {
    std::lock_guard lock(mutex_);
    if (now == nullptr) {
      acted_.erase(stringAt(*old, {"metadata", "uid"}));
    }
    if (before && (!after || before->backendPod != after->backendPod)) {
      if (auto it = followers_.find(before->backendPod); it != followers_.end()) {
        it->second.erase(pod);
        if (it->second.empty()) {
          followers_.erase(it);
        }
      }
    }
    if (after) {
      followers_[after->backendPod].insert(pod);
    }
  }
  // A pod that follows a backend now, or whose condition may have to go back: any change
  // of one (most are status updates) costs one look at two cached objects.
  if (after || (now != nullptr && backendLostCondition(*now) == "True")) {
    enqueue(pod);
  }
}

void BackendFollower::backendChanged(const json& backend) {
  std::vector<std::string> pods;
  {
    std::lock_guard lock(mutex_);
    if (auto it = followers_.find(cacheKey(backend)); it != followers_.end()) {
      pods.assign(it->second.begin(), it->second.end());
    }
    if (tainted_.contains(cacheKey(backend))) {
      pods.push_back(std::string(kTaintRulePrefix) + cacheKey(backend));
    }
    if (auto it = claimFollowers_.find(cacheKey(backend)); it != claimFollowers_.end()) {
      for (const auto& [claim, claimant] : it->second) {
        pods.push_back(claimant);
      }
    }
  }
  for (const auto& pod : pods) {
    enqueue(pod);
  }
}

void BackendFollower::enqueue(const std::string& pod) {
  leader_.enqueue(pod);
}

void BackendFollower::enqueueAll() {
  if (options_.taintLostDevices) {
    adoptTaintRules();
  }
  std::vector<std::string> pods;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [backend, followers] : followers_) {
      pods.insert(pods.end(), followers.begin(), followers.end());
    }
    for (const auto& [backend, entries] : claimFollowers_) {
      for (const auto& [claim, claimant] : entries) {
        pods.push_back(claimant);
      }
    }
  }
  for (const auto& pod : pods) {
    enqueue(pod);
  }
}

Result<SyncResult> BackendFollower::sync(const std::string& key) {
  if (key.starts_with(kClaimantPrefix)) {
    return syncClaimant(key);
  }
  if (key.starts_with(kTaintRulePrefix)) {
    return syncTaintRule(key.substr(kTaintRulePrefix.size()));
  }
  const auto [ns, name] = splitCacheKey(key);
  const ObjectSnapshot pod = frontendPods_.get(ns, name);
  if (!pod) {
    return SyncResult{};
  }
  const auto given = followed(*pod);
  if (!given) {
    return SyncResult{};
  }
  const auto [backendNs, backendName] = splitCacheKey(given->backendPod);
  const ObjectSnapshot backend = backendPods_.get(backendNs, backendName);
  const TimePoint at = now();
  const auto created = parseRfc3339(stringAt(*pod, {"metadata", "creationTimestamp"}));
  const BackendLoss loss =
      backendLoss(*given, backend.get(), created.value_or(TimePoint{}), at, options_.grace);
  return act(*pod, key, loss, "backend pod " + given->backendPod + " serves again at " + given->ip);
}

Result<SyncResult> BackendFollower::act(const json& pod, const std::string& key,
                                        const BackendLoss& loss, const std::string& servingAgain,
                                        bool recreatable, const std::string& advice) {
  const std::string uid = stringAt(pod, {"metadata", "uid"});
  switch (loss.kind) {
    case BackendLoss::Kind::kServing:
      if (backendLostCondition(pod) == "True") {
        {
          std::lock_guard lock(mutex_);
          acted_.erase(uid);
        }
        if (auto set = setCondition(pod, false, "BackendServing", servingAgain); !set) {
          return fail(set.error());
        }
      }
      return SyncResult{};
    case BackendLoss::Kind::kWaiting: {
      const Duration left = std::chrono::duration_cast<Duration>(*loss.recheckAt - now());
      return SyncResult{std::max<Duration>(left, std::chrono::seconds(1))};
    }
    case BackendLoss::Kind::kNotReady:
      if (massNotReady()) {
        if (!warnedMass_.exchange(true)) {
          log::warn(
              "most backend pods are not ready at once: no frontend is moved for that until "
              "fewer are (the control plane or the network is likelier at fault)",
              {{"pod", key}, {"why", loss.why}});
        }
        return SyncResult{options_.grace};
      }
      break;
    case BackendLoss::Kind::kGone:
      break;
  }
  {
    std::lock_guard lock(mutex_);
    if (acted_.contains(uid)) {
      return SyncResult{};  // deleted or marked; the watch has not brought it yet
    }
  }
  const std::string owner = recreatable ? controllingOwner(pod) : "";
  if (!owner.empty()) {
    if (auto done = recreate(pod, owner, loss.why); !done) {
      return fail(done.error());
    }
    std::lock_guard lock(mutex_);
    acted_.insert(uid);
    return SyncResult{};
  }
  if (backendLostCondition(pod) == "True") {
    return SyncResult{};  // marked before: the Event was written then
  }
  const std::string reason =
      loss.kind == BackendLoss::Kind::kGone ? "BackendGone" : "BackendNotReady";
  if (auto set = setCondition(pod, true, reason, loss.why); !set) {
    return fail(set.error());
  }
  {
    std::lock_guard lock(mutex_);
    acted_.insert(uid);
  }
  if (metrics_ != nullptr) {
    metrics_->backendLost("marked");
  }
  if (events_ != nullptr) {
    events_->record(referenceTo(pod, "v1", "Pod"), EventType::Warning, names::kBackendLostReason,
                    loss.why + "; " + advice);
  }
  log::warn("a GVirtuS pod lost its backend; marked, not deleted",
            {{"pod", key}, {"why", loss.why}});
  return SyncResult{};
}

Result<void> BackendFollower::recreate(const json& pod, const std::string& owner,
                                       const std::string& why) {
  const std::string key = cacheKey(pod);
  auto deleted =
      api_.deletePod(stringAt(pod, {"metadata", "namespace"}), stringAt(pod, {"metadata", "name"}),
                     stringAt(pod, {"metadata", "uid"}));
  if (!deleted) {
    // Gone already, or a new pod under the name (a StatefulSet's): nothing left to do.
    if (deleted.error().isNotFound() || deleted.error().isConflict()) {
      return {};
    }
    if (metrics_ != nullptr) {
      metrics_->backendLost("failed");
    }
    return fail(deleted.error().context("delete pod " + key + " for its owner to recreate"));
  }
  if (metrics_ != nullptr) {
    metrics_->backendLost("recreated");
  }
  if (events_ != nullptr) {
    events_->record(referenceTo(pod, "v1", "Pod"), EventType::Normal,
                    names::kBackendLostRecreatedReason,
                    why + "; deleted so that its " + owner +
                        " creates a new pod, which is given a live backend");
  }
  log::info("deleted a GVirtuS pod whose backend went away, for its owner to recreate",
            {{"pod", key}, {"owner", owner}, {"why", why}});
  return {};
}

Result<void> BackendFollower::setCondition(const json& pod, bool lost, const std::string& reason,
                                           const std::string& message) {
  // The pod's UID too: a pod made again under the name meanwhile is not marked (409).
  const json patch = {
      {"metadata", {{"uid", stringAt(pod, {"metadata", "uid"})}}},
      {"status",
       {{"conditions", json::array({{{"type", names::kBackendLostCondition},
                                     {"status", lost ? "True" : "False"},
                                     {"reason", reason},
                                     {"message", message},
                                     {"lastTransitionTime", formatRfc3339(now())}}})}}}};
  auto patched = api_.patchStatus(stringAt(pod, {"metadata", "namespace"}),
                                  stringAt(pod, {"metadata", "name"}), patch.dump());
  if (!patched) {
    if (patched.error().isNotFound() || patched.error().isConflict()) {
      return {};  // gone, or another pod under the name: the cache brings it
    }
    if (metrics_ != nullptr && lost) {
      metrics_->backendLost("failed");
    }
    return fail(patched.error().context(
        "set condition " + std::string(names::kBackendLostCondition) + " of pod " + cacheKey(pod)));
  }
  return {};
}

void BackendFollower::run(std::stop_token stop) {
  log::info("backend follower started", {{"grace", formatDuration(options_.grace)}});
  // Every following pod once the caches have synced: a backend may have gone while no
  // replica led.
  leader_.run(stop, {.synced =
                         [this] {
                           return backendPods_.hasSynced() && frontendPods_.hasSynced() &&
                                  claimantsSynced();
                         },
                     .enqueueAll = [this] { enqueueAll(); }});
  log::info("backend follower stopped");
}

}  // namespace gvirtus::webhook
