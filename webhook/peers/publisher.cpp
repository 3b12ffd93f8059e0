#include "webhook/peers/publisher.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base/json_access.h"
#include "common/contract/backend_load.h"
#include "common/contract/pod_status.h"
#include "common/kube/api/resource.h"
#include "common/telemetry/log.h"
#include "webhook/base/metrics.h"
#include "webhook/base/names.h"
#include "webhook/pods/pod_fields.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// Writes to different backend pods go this many at a time: one slow write (a retried
// PATCH) does not hold back the lists of the other backends. A pod never syncs on two.
constexpr int kWorkers = 4;
// How often run() looks again while the caches have not synced yet.
constexpr auto kSyncPoll = std::chrono::milliseconds(200);

// The values a backend pod carries; nullopt where absent (never published).
PeerAnnotations carriedPeers(const json& pod) {
  return {optionalStringAt(pod, {"metadata", "annotations", kPeersAnnotation}),
          optionalStringAt(pod, {"metadata", "annotations", kPeerMemoryAnnotation})};
}

// The GPUs its load report lists; none while it has not published one that parses.
std::vector<GpuLoad> reportedGpus(const json& backendPod) {
  auto load = parseBackendLoad(stringAt(backendPod, {"metadata", "annotations", kLoadAnnotation}));
  return load ? std::move(load->gpus) : std::vector<GpuLoad>{};
}

// Each reported GPU's index and total: what a share of a fraction is computed from.
std::vector<std::pair<int64_t, int64_t>> gpuTotals(const json& backendPod) {
  std::vector<std::pair<int64_t, int64_t>> totals;
  for (const auto& gpu : reportedGpus(backendPod)) {
    totals.emplace_back(gpu.index, gpu.memoryTotalMiB);
  }
  return totals;
}

}  // namespace

PeerWriter peerWriter(KubeClient& client) {
  return [&client](const std::string& ns, const std::string& name,
                   const std::string& mergePatch) -> Result<void> {
    auto patched = client.patch(resources::kPods, ns, name, PatchType::Merge, mergePatch);
    if (!patched) {
      return fail(patched.error());
    }
    return {};
  };
}

PeerPublisher::PeerPublisher(ObjectCache& backendPods, ObjectCache& frontendPods, PeerWriter write,
                             WebhookMetrics* metrics, PeerPublisherOptions options,
                             ClaimantCaches claimants)
    : backendPods_(backendPods),
      frontendPods_(frontendPods),
      claimants_(claimants),
      write_(std::move(write)),
      metrics_(metrics),
      options_(options),
      leader_(ControllerOptions{.name = "peers",
                                .workers = kWorkers,
                                .backoffInitial = options_.backoffInitial,
                                .backoffMax = options_.backoffMax,
                                .syncPoll = kSyncPoll},
              [this](const std::string& backendPod) -> Result<SyncResult> {
                if (auto wrote = sync(backendPod); !wrote) {
                  return fail(wrote.error());
                }
                return SyncResult{};
              }) {
  frontendPods_.addHandlers(
      {.onAdd = [this](const json& pod) { frontendChanged(pod, false); },
       .onUpdate = [this](const json&, const json& now) { frontendChanged(now, false); },
       .onDelete = [this](const json& pod) { frontendChanged(pod, true); }});
  // A backend pod's load report changes every few seconds and alters no list: only a new
  // address, values that are not what was written (an edit, a lost write), or GPUs of other
  // sizes (the shares of fractions) need a look.
  backendPods_.addHandlers({.onAdd = [this](const json& pod) { enqueue(cacheKey(pod)); },
                            .onUpdate =
                                [this](const json& old, const json& now) {
                                  if (podIpv4(old) != podIpv4(now) ||
                                      carriedPeers(old) != carriedPeers(now) ||
                                      gpuTotals(old) != gpuTotals(now)) {
                                    enqueue(cacheKey(now));
                                  }
                                },
                            .onDelete = [this](const json& pod) { enqueue(cacheKey(pod)); }});
  if (claimants_.claims != nullptr && claimants_.pods != nullptr) {
    claimants_.claims->addHandlers(
        {.onAdd = [this](const json& claim) { claimChanged(claim, false); },
         .onUpdate = [this](const json&, const json& now) { claimChanged(now, false); },
         .onDelete = [this](const json& claim) { claimChanged(claim, true); }});
    claimants_.pods->addHandlers(
        {.onAdd = [this](const json& pod) { claimantChanged(pod); },
         .onUpdate = [this](const json&, const json& now) { claimantChanged(now); },
         .onDelete = [this](const json& pod) { claimantChanged(pod); }});
  }
}

void PeerPublisher::frontendChanged(const json& pod, bool gone) {
  // What the pod claimed before is what this index holds, not what the event's old object
  // says: a pod deleted at once (no grace, or lost with its node) or stripped of its label
  // leaves with an object that claims nothing, and its address must leave the list too.
  Due due;
  {
    std::lock_guard lock(mutex_);
    indexLocked(cacheKey(pod), gone ? std::nullopt : peerClaim(pod), due);
  }
  for (const auto& [backendPod, delay] : due) {
    enqueue(backendPod, delay);
  }
}

void PeerPublisher::indexLocked(const std::string& key, const std::optional<PeerClaim>& after,
                                Due& due) {
  std::optional<PeerClaim> before;
  auto stored = claimOf_.find(key);
  if (stored != claimOf_.end()) {
    before = stored->second;
  }
  if (before == after) {
    return;  // a status update, a new condition: the lists stay as they are
  }
  if (before) {
    if (auto it = claims_.find(before->backendPod); it != claims_.end()) {
      it->second.erase(key);
      if (it->second.empty()) {
        claims_.erase(it);
      }
    }
    claimOf_.erase(stored);
    due.emplace_back(before->backendPod, delayLocked(before->backendPod));
  }
  if (after) {
    claims_[after->backendPod].insert(key);
    claimOf_.emplace(key, *after);
    if (!before || after->backendPod != before->backendPod) {
      due.emplace_back(after->backendPod, delayLocked(after->backendPod));
    }
  }
}

void PeerPublisher::claimChanged(const json& claim, bool gone) {
  const std::string key = cacheKey(claim);
  const auto [ns, name] = splitCacheKey(key);
  ClaimPeers now = gone ? ClaimPeers{} : claimPeers(claim);
  Due due;
  {
    std::lock_guard lock(mutex_);
    auto held = claimPeers_.find(key);
    if (held != claimPeers_.end()) {
      if (held->second == now) {
        return;
      }
      for (const auto& reservation : held->second.reservedFor) {
        auto it = claimsOfPod_.find(cacheKey(ns, reservation.pod));
        if (it != claimsOfPod_.end()) {
          it->second.erase(key);
          if (it->second.empty()) {
            claimsOfPod_.erase(it);
          }
        }
      }
    }
    for (const auto& reservation : now.reservedFor) {
      claimsOfPod_[cacheKey(ns, reservation.pod)].insert(key);
    }
    if (now.backendPods.empty() && now.reservedFor.empty()) {
      claimPeers_.erase(key);
    } else {
      claimPeers_[key] = std::move(now);
    }
    refreshClaimLocked(key, due);
  }
  for (const auto& [backendPod, delay] : due) {
    enqueue(backendPod, delay);
  }
}

void PeerPublisher::claimantChanged(const json& pod) {
  Due due;
  {
    std::lock_guard lock(mutex_);
    auto it = claimsOfPod_.find(cacheKey(pod));
    if (it == claimsOfPod_.end()) {
      return;  // no claim of ours is reserved for it (yet: the claim's event will look)
    }
    for (const auto& claimKey : it->second) {
      refreshClaimLocked(claimKey, due);
    }
  }
  for (const auto& [backendPod, delay] : due) {
    enqueue(backendPod, delay);
  }
}

void PeerPublisher::refreshClaimLocked(const std::string& claimKey, Due& due) {
  const auto [ns, name] = splitCacheKey(claimKey);
  std::map<std::string, PeerClaim> wanted;
  if (auto held = claimPeers_.find(claimKey); held != claimPeers_.end()) {
    for (const auto& reservation : held->second.reservedFor) {
      // The pod the scheduler reserved the claim for, by UID: a pod made again under the
      // name is another pod. Not finished, not being deleted, naming the claim itself, not
      // on its node's network, with an address.
      const ObjectSnapshot pod = claimants_.pods->get(ns, reservation.pod);
      if (!pod || !holdsReservation(*pod, reservation, name)) {
        continue;
      }
      const std::string ip = podIpv4(*pod);
      if (ip.empty()) {
        continue;
      }
      for (const auto& backendPod : held->second.backendPods) {
        // Its share there: the memory the scheduler counted for the claim on that pod.
        std::optional<GpuShare> share;
        if (auto memory = held->second.memoryMiB.find(backendPod);
            memory != held->second.memoryMiB.end()) {
          share = GpuShare{cacheKey(ns, reservation.pod), 0, {}};
          share->demand.gpuMemoryMiB = memory->second;
        }
        wanted.emplace("claim:" + claimKey + "#" + reservation.pod + "@" + backendPod,
                       PeerClaim{backendPod, "", ip, std::move(share)});
      }
    }
  }
  std::set<std::string>& indexed = indexedOfClaim_[claimKey];
  for (auto it = indexed.begin(); it != indexed.end();) {
    if (!wanted.contains(*it)) {
      indexLocked(*it, std::nullopt, due);
      it = indexed.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [key, claim] : wanted) {
    indexLocked(key, claim, due);
    indexed.insert(key);
  }
  if (indexed.empty()) {
    indexedOfClaim_.erase(claimKey);
  }
}

Duration PeerPublisher::delayLocked(const std::string& backendPod) const {
  auto last = lastSync_.find(backendPod);
  if (last == lastSync_.end()) {
    return Duration::zero();
  }
  const auto next = last->second + options_.coalesce;
  const auto now = std::chrono::steady_clock::now();
  return next > now ? std::chrono::ceil<Duration>(next - now) : Duration::zero();
}

void PeerPublisher::enqueue(const std::string& backendPod, Duration after) {
  leader_.enqueue(backendPod, after);
}

void PeerPublisher::enqueueAll() {
  for (const auto& pod : backendPods_.list()) {
    enqueue(cacheKey(*pod));
  }
}

Result<bool> PeerPublisher::sync(const std::string& backendPod) {
  const auto [ns, name] = splitCacheKey(backendPod);
  const ObjectSnapshot pod = backendPods_.get(ns, name);
  if (!pod) {
    std::lock_guard lock(mutex_);
    written_.erase(backendPod);
    lastSync_.erase(backendPod);
    return false;
  }
  // Without an address it takes no connection, and its list waits for the address (an
  // update this publisher is told of). Written earlier, the patch races the pod's first
  // status write; on kwok's nodes such pods were seen to change address afterwards.
  if (podIpv4(*pod).empty()) {
    return false;
  }
  const std::vector<PeerClaim> claims = claimsOn(backendPod, *pod);
  const std::vector<std::string> peers =
      backendPeers(backendPod, backendEndpoint(*pod, options_.port), claims);
  if (peers.size() > options_.maxPeers && !warnedCap_.exchange(true)) {
    log::warn(
        "a backend pod has more peers than one list holds; the highest addresses are left "
        "out and refused by its backend (logged once)",
        {{"backendPod", backendPod}, {"peers", peers.size()}, {"max", options_.maxPeers}});
  }
  const std::vector<PeerShare> shares = backendPeerShares(
      backendPod, backendEndpoint(*pod, options_.port), claims, reportedGpus(*pod));
  const PeerAnnotations value{peersValue(peers, options_.maxPeers),
                              peerMemoryValue(shares, std::min(options_.maxPeers, kMaxShares))};
  if (carriedBy(backendPod, *pod) == value) {
    return false;
  }
  // A merge patch of these two keys, in one write so that the shim never sees a peer without
  // its share, not guarded by a resourceVersion: no one else writes them (manifests/policy),
  // the values are derived from the caches, not from what the pod held, and other
  // annotations (the shim's gvirtus.io/load) are left as they are. A write from a stale cache
  // is corrected by the next event of either cache.
  json patch = {{"metadata",
                 {{"annotations",
                   {{std::string(kPeersAnnotation), *value.peers},
                    {std::string(kPeerMemoryAnnotation), *value.memory}}}}}};
  auto wrote = write_(ns, name, patch.dump());
  if (!wrote) {
    if (wrote.error().isNotFound()) {
      return false;  // deleted meanwhile: its delete event follows
    }
    if (metrics_ != nullptr) {
      metrics_->peersFailed();
    }
    return fail(wrote.error().context("write gvirtus.io/peers of backend pod " + backendPod));
  }
  if (metrics_ != nullptr) {
    metrics_->peersPublished();
  }
  log::debug("published the peers of a backend pod",
             {{"backendPod", backendPod},
              {"peers", std::min(peers.size(), options_.maxPeers)},
              {"gpuMemoryShares", std::min({shares.size(), options_.maxPeers, kMaxShares})}});
  std::lock_guard lock(mutex_);
  written_[backendPod] = Written{stringAt(*pod, {"metadata", "resourceVersion"}), value};
  return true;
}

std::vector<PeerClaim> PeerPublisher::claimsOn(const std::string& backendPod, const json& pod) {
  std::vector<PeerClaim> claims;
  std::lock_guard lock(mutex_);
  lastSync_[backendPod] = std::chrono::steady_clock::now();
  if (auto it = claims_.find(backendPod); it != claims_.end()) {
    claims.reserve(it->second.size());
    const std::string endpoint = backendEndpoint(pod, options_.port);
    for (const auto& key : it->second) {
      claims.push_back(claimOf_.at(key));
      if (key.starts_with("claim:")) {
        claims.back().endpoint = endpoint;  // the pool names this pod (claimOf_)
      }
    }
  }
  return claims;
}

PeerAnnotations PeerPublisher::carriedBy(const std::string& backendPod, const json& pod) {
  const std::string resourceVersion = stringAt(pod, {"metadata", "resourceVersion"});
  std::lock_guard lock(mutex_);
  if (auto it = written_.find(backendPod); it != written_.end()) {
    if (!resourceVersion.empty() && it->second.fromResourceVersion == resourceVersion) {
      return it->second.value;
    }
    written_.erase(it);
  }
  return carriedPeers(pod);
}

void PeerPublisher::run(std::stop_token stop) {
  {
    // What another leader wrote meanwhile is read from the pods again.
    std::lock_guard lock(mutex_);
    written_.clear();
  }
  log::info("peer publisher started", {{"port", options_.port}});
  // Every backend pod once the caches have synced: what the previous leader wrote last may
  // be out of date, and a backend pod may never have had its list.
  leader_.run(stop,
              {.synced =
                   [this] {
                     return backendPods_.hasSynced() && frontendPods_.hasSynced() &&
                            (claimants_.claims == nullptr || claimants_.claims->hasSynced()) &&
                            (claimants_.pods == nullptr || claimants_.pods->hasSynced());
                   },
               .enqueueAll = [this] { enqueueAll(); }});
  log::info("peer publisher stopped");
}

}  // namespace gvirtus::webhook
