#include "webhook/release/controller.h"

#include <algorithm>
#include <tuple>

#include "common/base/json_access.h"
#include "common/contract/backend_requirements.h"
#include "common/kube/api/resource.h"
#include "common/telemetry/log.h"
#include "webhook/base/metrics.h"
#include "webhook/base/names.h"
#include "webhook/pods/pod_fields.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// Keys of the controller's queue besides the units' (which hold a '/', these never do): the
// resync of the parked units, and the tell of their demand to the autoscaler.
constexpr const char* kResyncKey = "resync";
constexpr const char* kDemandKey = "demand";
// Tells of the demand come at most this often: every parked or released unit changes it.
constexpr auto kDemandDelay = std::chrono::milliseconds(500);
// How often a term looks again while the caches have not synced yet.
constexpr auto kSyncPoll = std::chrono::milliseconds(200);

// What a unit is parked under (parked_units.h): a lone pod's requirements less its name, so
// that pods asking the same are judged once; a gang, or a pod whose requirements do not
// parse, alone.
ParkGroup parkGroupOf(const std::string& key, const std::optional<BackendRequirements>& asked) {
  if (!isGangUnitKey(key) && asked) {
    ParkGroup group{.asked = *asked, .unit = ""};
    group.asked.pod.clear();
    return group;
  }
  return ParkGroup{.asked = {}, .unit = key};
}

// What a pod asks where its choice did not parse it (a gang member, a failed write);
// nullopt where its annotations do not parse.
std::optional<BackendRequirements> parsedAsk(const json& pod) {
  auto asked = requirementsFromPod(pod);
  return asked ? std::optional(std::move(*asked)) : std::nullopt;
}

}  // namespace

WaitingPodController::WaitingPodController(KubeClient& client, const BackendSource& backends,
                                           BackendChooser& chooser, EventRecorder& events,
                                           WebhookMetrics* metrics,
                                           WaitingPodControllerOptions options)
    : client_(client),
      backends_(backends),
      chooser_(chooser),
      metrics_(metrics),
      options_(std::move(options)),
      reporter_(events, metrics,
                [this](const std::string& endpoint) {
                  std::lock_guard lock(mutex_);
                  auto it = offers_.find(endpoint);
                  return it != offers_.end() ? std::optional(it->second.since) : std::nullopt;
                }),
      leader_(ControllerOptions{.name = "waiting-pods",
                                // One: pods are given backends in their order.
                                .workers = 1,
                                .backoffInitial = std::chrono::milliseconds(500),
                                .backoffMax = std::chrono::seconds(30),
                                .syncPoll = kSyncPoll},
              [this](const std::string& key) { return sync(key); }),
      queue_([this](const std::string& unit) { leader_.enqueue(unit); }),
      assigner_(chooser, options_.plugins) {
  if (options_.gvirtusPods != nullptr) {
    options_.gvirtusPods->addHandlers(gangMemberHandlers());  // before its owner starts it
  }
}

void WaitingPodController::backendsChanged() {
  const auto now = std::chrono::system_clock::now();
  const auto backends = backends_.backends();
  std::unique_lock lock(mutex_);
  std::map<std::string, Offer> next;
  for (const auto& backend : *backends) {
    Backend seen = backend.withoutPods();
    if (seen.load) {
      seen.load->updated.reset();
    }
    auto it = offers_.find(seen.endpoint());
    const auto since = it != offers_.end() && it->second.backend == seen ? it->second.since : now;
    next.emplace(seen.endpoint(), Offer{seen, since});
  }
  offers_ = std::move(next);
  lock.unlock();
  // A backend that appeared or changed may take what waited for room.
  queue_.roomMayHaveChanged();
  queue_.putBackOldest(options_.parallelReleases);
}

void WaitingPodController::run(std::stop_token stop) {
  TermCaches caches(client_, options_.ownNamespace, options_.gvirtusPods);
  const ReleaseUnits units(caches);
  queue_.reset();
  reporter_.reset();
  caches_ = &caches;
  units_ = &units;
  stop_ = stop;
  caches.pods.addHandlers(waitingPodHandlers());
  caches.podGroups.addHandlers(podGroupHandlers());
  if (caches.ownGvirtusPods) {
    caches.ownGvirtusPods->addHandlers(gangMemberHandlers());
  }
  writes_ = std::make_unique<WritePool>(
      options_.parallelReleases, writer(),
      [this](PendingWrite write, Result<void> result) { written(std::move(write), result); });
  caches.start();
  log::info("waiting-pod controller started", {{"excludedNamespace", options_.ownNamespace}});
  leader_.run(stop, {.synced = [&] { return caches.synced() && backends_.ready(); },
                     .enqueueAll = [this] { enqueueAll(); }});
  writes_.reset();  // the releases chosen are written
  caches.stop();
  caches_ = nullptr;
  units_ = nullptr;
  queue_.reset();
  reporter_.reset();
  log::info("waiting-pod controller stopped");
}

void WaitingPodController::enqueueAll() {
  // Oldest first: the queue hands keys out in the order they came.
  std::vector<std::string> units;
  std::set<std::string> seen;
  for (const auto& pod : waitingPods(caches_->pods.list())) {
    if (std::string unit = units_->unitOf(*pod); seen.insert(unit).second) {
      units.push_back(std::move(unit));
    }
  }
  queue_.putBack(units);  // tried before the autoscaler is told
  leader_.enqueue(kResyncKey, options_.resync);
  if (units.empty()) {
    leader_.enqueue(kDemandKey);
  }
}

Result<SyncResult> WaitingPodController::sync(const std::string& key) {
  if (key == kDemandKey) {
    tellDemand();
    return SyncResult{};
  }
  if (key == kResyncKey) {
    // Load reports age and own assignments expire without any event: every group is tried
    // again, and the autoscaler told at least this often.
    queue_.demandMayHaveChanged();
    queue_.putBackOldest(options_.parallelReleases);
    reporter_.refreshGauges();
    tellDemand();
    if (metrics_ != nullptr) {
      metrics_->releaseLooked();
    }
    return SyncResult{.requeueAfter = options_.resync};
  }
  auto result = syncUnit(key);
  if (queue_.end()) {
    leader_.enqueue(kDemandKey, kDemandDelay);
  }
  if (metrics_ != nullptr) {
    metrics_->releaseLooked();
  }
  return result;
}

Result<SyncResult> WaitingPodController::syncUnit(const std::string& key) {
  // Its release patch failed (written()): this sync fails, so that the work queue's backoff
  // decides when it is tried again.
  if (auto failed = queue_.takeFailure(key)) {
    return fail(failed->context("releasing " + key));
  }
  const std::optional<uint64_t> ticket = queue_.begin(key);
  if (!ticket) {
    return SyncResult{};  // its patch is being written
  }
  const std::vector<ObjectSnapshot> pods = podsOfUnit(key);
  if (pods.empty()) {
    return SyncResult{};
  }
  if (isGangUnitKey(key)) {
    return releaseGang(key, pods, *ticket);
  }
  const ObjectSnapshot& pod = pods.front();
  LoneRelease release = chooseAlone(pod, *backends_.backends(), assigner_);
  if (!release.patch) {
    settle(key, {release.outcome}, *ticket);
    return SyncResult{};
  }
  queue_.writing(key);
  // Where it found room, the next of its group may find some too.
  queue_.putBackNext(parkGroupOf(key, release.outcome.asked));
  writes_->submit({key, pod, std::move(*release.patch), std::move(*release.outcome.choice)});
  return SyncResult{};
}

Result<SyncResult> WaitingPodController::releaseGang(const std::string& key,
                                                     const std::vector<ObjectSnapshot>& pods,
                                                     uint64_t ticket) {
  const std::optional<Gang> gang = units_->gangOf(*pods.front());
  const BackendSnapshot backends = backends_.backends();
  const auto outcomes = releaseWaitingPods(
      pods, *backends, chooser_, options_.plugins, writer(), stop_,
      [&gang](const json&) { return gang; }, options_.parallelReleases);
  if (!settle(key, outcomes, ticket)) {
    return fail("a pod of " + key + " could not be released (logged above)");
  }
  return SyncResult{};
}

ReleaseWriter WaitingPodController::writer() {
  return [this](const json& pod, const JsonPatch& patch) -> Result<void> {
    auto patched =
        client_.patch(resources::kPods, stringAt(pod, {"metadata", "namespace"}),
                      stringAt(pod, {"metadata", "name"}), PatchType::Json, patch.dump());
    if (!patched) {
      return fail(patched.error());
    }
    return {};
  };
}

void WaitingPodController::written(PendingWrite write, Result<void> result) {
  PodOutcome outcome;
  outcome.pod = write.pod;
  outcome.choice = write.choice;
  const std::string uid = podUid(*write.pod);
  // A pod changed or gone since it was read: its change (or deletion) is what comes next.
  bool changed = false;
  if (result) {
    outcome.kind = PodOutcome::Kind::Released;
    outcome.at = std::chrono::system_clock::now();
  } else {
    outcome.kind = PodOutcome::Kind::Failed;
    outcome.error = result.error();
    changed = isReleaseConflict(result.error()) || result.error().isNotFound();
    chooser_.cancelAssignment(write.choice);
  }
  if (result) {
    queue_.released(uid, stringAt(*write.pod, {"metadata", "resourceVersion"}));
  } else if (changed) {
    // Its backend, given back, may take the next of its group.
    queue_.roomMayHaveChanged();
    queue_.putBackNext(parkGroupOf(write.unit, parsedAsk(*write.pod)));
  }
  queue_.written(write.unit, result || changed ? std::nullopt : std::optional(result.error()));
  reporter_.report(outcome);
  if (result) {
    reporter_.noLongerWaits(uid);
  } else {
    reporter_.waits(*write.pod);
    leader_.enqueue(write.unit);
  }
}

std::vector<ObjectSnapshot> WaitingPodController::podsOfUnit(const std::string& key) {
  std::vector<ObjectSnapshot> pods;
  bool moved = false;
  for (const auto& pod : units_->podsOf(key)) {
    if (!isWaiting(*pod)) {  // released, by us or another replica
      queue_.forget(podUid(*pod));
      reporter_.noLongerWaits(podUid(*pod));
    } else if (std::string unit = units_->unitOf(*pod); unit != key) {
      leader_.enqueue(unit);  // its PodGroup came, or went: another unit's now
      moved = true;
    } else if (!queue_.releasedAsCached(*pod)) {
      pods.push_back(pod);
    }
  }
  return moved ? std::vector<ObjectSnapshot>{} : pods;
}

bool WaitingPodController::settle(const std::string& key, const std::vector<PodOutcome>& outcomes,
                                  uint64_t ticket) {
  bool ok = true;
  std::optional<ParkedUnits::Entry> parked;
  for (const auto& outcome : outcomes) {
    reporter_.report(outcome);
    const json& pod = *outcome.pod;
    switch (outcome.kind) {
      case PodOutcome::Kind::Released:
        queue_.released(podUid(pod), stringAt(pod, {"metadata", "resourceVersion"}));
        break;
      case PodOutcome::Kind::Waiting: {
        reporter_.waits(pod);
        // A lone pod's choice parsed what it asks; a gang member's is parsed here.
        std::optional<BackendRequirements> asked = outcome.asked ? outcome.asked : parsedAsk(pod);
        if (!parked) {
          parked = {.unit = key,
                    .group = parkGroupOf(key, asked),
                    .waitingSince = createdAt(pod),  // outcomes are oldest first
                    .demand = {}};
        }
        // Kept only for an autoscaler: at 10,000 parked pods it is 10,000 references.
        if (outcome.forCapacity && options_.onDemand && asked) {
          parked->demand.push_back(
              {referenceTo(pod, "v1", "Pod"), std::move(*asked), createdAt(pod)});
        }
        break;
      }
      case PodOutcome::Kind::Failed:
        // A pod changed or gone is synced again on its change; another failure with backoff.
        reporter_.waits(pod);
        ok = ok && (isReleaseConflict(*outcome.error) || outcome.error->isNotFound());
        break;
      case PodOutcome::Kind::Refused:
        break;  // waits for a change of its own
    }
  }
  if (parked) {
    queue_.park(std::move(*parked), ticket);
  }
  return ok;
}

void WaitingPodController::tellDemand() {
  auto demand = queue_.demandToTell();
  if (demand && options_.onDemand) {
    options_.onDemand(std::move(*demand), backends_.backends());
  }
}

ResourceEventHandlers WaitingPodController::waitingPodHandlers() {
  return {
      .onAdd = [this](const json& pod) { leader_.enqueue(units_->unitOf(pod)); },
      .onUpdate =
          [this](const json& before, const json& now) {
            const std::string unit = units_->unitOf(now);
            leader_.enqueue(unit);
            if (std::string was = units_->unitOf(before); was != unit) {
              leader_.enqueue(was);
            }
          },
      .onDelete =
          [this](const json& pod) {
            const std::string uid = podUid(pod);
            queue_.forget(uid);
            reporter_.noLongerWaits(uid);
            leader_.enqueue(units_->unitOf(pod));  // out of the parked units; its gang looks again
          }};
}

ResourceEventHandlers WaitingPodController::podGroupHandlers() {
  auto changed = [this](const json& group) {
    leader_.enqueue(gangUnitKey(stringAt(group, {"metadata", "namespace"}),
                                stringAt(group, {"metadata", "name"})));
  };
  return {.onAdd = changed,
          .onUpdate = [changed](const json&, const json& now) { changed(now); },
          .onDelete = changed};
}

ResourceEventHandlers WaitingPodController::gangMemberHandlers() {
  auto changed = [this](const json& pod) {
    const std::string group = stringAt(pod, {"metadata", "annotations", kPodGroupAnnotation});
    if (!group.empty()) {
      leader_.enqueue(gangUnitKey(stringAt(pod, {"metadata", "namespace"}), group));
    }
  };
  return {.onAdd = changed,
          .onUpdate = [changed](const json&, const json& now) { changed(now); },
          .onDelete = changed};
}

}  // namespace gvirtus::webhook
