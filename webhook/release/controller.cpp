#include "webhook/release/controller.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "common/base/json_access.h"
#include "common/cache/resource_cache.h"
#include "common/contract/backend_requirements.h"
#include "common/contract/pod_status.h"
#include "common/kube/resource.h"
#include "common/telemetry/log.h"
#include "common/time/time_text.h"
#include "webhook/base/metrics.h"
#include "webhook/base/names.h"
#include "webhook/pods/pod_fields.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// The one key of the controller's queue: every change asks for a pass over all waiting
// pods, since which pod gets a backend depends on the others (oldest first, capacity).
constexpr const char* kPassKey = "pass";
// How often run() looks again while the caches have not synced yet.
constexpr auto kSyncPoll = std::chrono::milliseconds(200);

// KAI-Scheduler's PodGroups: read to learn a gang's minMember.
const KubeResource kPodGroups{"scheduling.run.ai", "v2alpha2", "podgroups", true};

// Of a PodGroup the cache keeps its name and minMember: a pass reads nothing else.
json podGroupFields(json group) {
  json kept = {{"metadata", json::object()}};
  for (const char* key : {"name", "namespace", "uid", "resourceVersion"}) {
    if (const json* value = memberAt(group, {"metadata", key})) {
      kept["metadata"][key] = *value;
    }
  }
  if (const json* minMember = memberAt(group, {"spec", "minMember"})) {
    kept["spec"]["minMember"] = *minMember;
  }
  return kept;
}

}  // namespace

std::vector<ObjectSnapshot> waitingPods(const std::vector<ObjectSnapshot>& pods) {
  std::vector<std::tuple<SystemTime, std::string, ObjectSnapshot>> ranked;
  for (const auto& pod : pods) {
    if (isWaiting(*pod)) {
      ranked.emplace_back(createdAt(*pod), cacheKey(*pod), pod);
    }
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  std::vector<ObjectSnapshot> out;
  out.reserve(ranked.size());
  for (auto& entry : ranked) {
    out.push_back(std::move(std::get<2>(entry)));
  }
  return out;
}

WaitingPodController::WaitingPodController(KubeClient& client, const BackendSource& backends,
                                           BackendChooser& chooser, EventRecorder& events,
                                           WebhookMetrics* metrics,
                                           WaitingPodControllerOptions options)
    : client_(client),
      backends_(backends),
      chooser_(chooser),
      events_(events),
      metrics_(metrics),
      options_(std::move(options)),
      reporter_(events, metrics, [this](const std::string& endpoint) {
        std::lock_guard lock(mutex_);
        auto it = offers_.find(endpoint);
        return it != offers_.end() ? std::optional(it->second.since) : std::nullopt;
      }) {
  if (options_.gvirtusPods != nullptr) {
    options_.gvirtusPods->addHandlers(gangMemberHandlers());  // before its owner starts it
  }
}

void WaitingPodController::backendsChanged() {
  const auto now = std::chrono::system_clock::now();
  const auto backends = backends_.backends();
  std::lock_guard lock(mutex_);
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
  if (controller_) {
    controller_->enqueue(kPassKey);
  }
}

void WaitingPodController::wake() {
  std::lock_guard lock(mutex_);
  if (controller_) {
    controller_->enqueue(kPassKey);
  }
}

ResourceEventHandlers WaitingPodController::gangMemberHandlers() {
  auto changed = [this](const json& pod) {
    if (!stringAt(pod, {"metadata", "annotations", kPodGroupAnnotation}).empty()) {
      wake();
    }
  };
  return {.onAdd = changed,
          .onUpdate = [changed](const json&, const json& now) { changed(now); },
          .onDelete = changed};
}

void WaitingPodController::run(std::stop_token stop) {
  // Unscheduled GVirtuS pods outside the webhook's namespace: a released pod leaves the
  // cache once the scheduler binds it.
  std::string fieldSelector = "spec.nodeName=";
  if (!options_.ownNamespace.empty()) {
    fieldSelector += ",metadata.namespace!=" + options_.ownNamespace;
  }
  ResourceCache pods(client_, resources::kPods, "", std::string(kEnabledLabel) + "=true",
                     fieldSelector, ResourceCacheOptions{.transform = waitingFields});
  // A PodGroup's minMember may come after its pods: a change asks for a pass. Without
  // KAI's CRD the cache is empty and every pod goes alone.
  ResourceCache podGroups(
      client_, kPodGroups, "", "", "",
      ResourceCacheOptions{.transform = podGroupFields, .absentMeansEmpty = true});
  std::unique_ptr<ResourceCache> ownGvirtusCache;
  std::unique_ptr<GvirtusPodStore> ownGvirtusPods;
  GvirtusPodStore* gvirtusPods = options_.gvirtusPods;
  if (gvirtusPods == nullptr) {
    ownGvirtusCache = std::make_unique<ResourceCache>(client_, resources::kPods, "",
                                                      std::string(kEnabledLabel) + "=true", "",
                                                      gvirtusPodOptions());
    ownGvirtusPods = std::make_unique<GvirtusPodStore>(*ownGvirtusCache);
    gvirtusPods = ownGvirtusPods.get();
  }
  gvirtusPods_ = gvirtusPods;
  podGroups_ = &podGroups;

  RunState state;
  reporter_.reset();
  auto controller = std::make_shared<Controller>(
      ControllerOptions{.name = "waiting-pods",
                        .backoffInitial = std::chrono::milliseconds(500),
                        .backoffMax = std::chrono::seconds(30),
                        .syncPoll = kSyncPoll},
      [&, stop](const std::string&) -> Result<SyncResult> {
        const bool ok = pass(stop, pods.list(), state);
        if (metrics_ != nullptr) {
          metrics_->passDone();
        }
        if (!ok) {
          return fail("a waiting pod could not be released (logged above)");
        }
        // Load reports age and own assignments expire without any event: look again.
        return SyncResult{.requeueAfter = options_.resync};
      });
  {
    std::lock_guard lock(mutex_);
    controller_ = controller;
  }
  pods.addHandlers(controller->enqueueOnAnyChange(kPassKey));
  pods.start();
  podGroups.addHandlers(controller->enqueueOnAnyChange(kPassKey));
  podGroups.start();
  if (ownGvirtusPods) {
    ownGvirtusPods->addHandlers(gangMemberHandlers());
    ownGvirtusPods->start();
  }
  log::info("waiting-pod controller started", {{"excludedNamespace", options_.ownNamespace}});
  controller->enqueue(kPassKey);
  controller->run(stop, [&] {
    return pods.hasSynced() && podGroups.hasSynced() && gvirtusPods->hasSynced() &&
           backends_.ready();
  });

  // The caches stop before the controller goes: their handlers enqueue on it.
  if (ownGvirtusCache) {
    ownGvirtusCache->stop();
  }
  podGroups.stop();
  pods.stop();
  gvirtusPods_ = nullptr;
  podGroups_ = nullptr;
  {
    std::lock_guard lock(mutex_);
    controller_.reset();
  }
  if (metrics_ != nullptr) {
    metrics_->waitingPods(0);
  }
  log::info("waiting-pod controller stopped");
}

bool WaitingPodController::pass(std::stop_token stop, const std::vector<ObjectSnapshot>& pods,
                                RunState& state) {
  // One snapshot for the whole pass: the autoscaler is told the backends its outcomes saw.
  BackendSnapshot backends = backends_.backends();
  std::vector<ObjectSnapshot> waiting;
  std::set<std::string> present;
  for (auto& pod : waitingPods(pods)) {
    const std::string uid = podUid(*pod);
    present.insert(uid);
    // Released by us, and the cache has not caught up yet: the patch's test would fail.
    auto released = state.releasedFrom.find(uid);
    if (released != state.releasedFrom.end() &&
        released->second == stringAt(*pod, {"metadata", "resourceVersion"})) {
      continue;
    }
    waiting.push_back(std::move(pod));
  }
  // A pod deleted, or released, is forgotten.
  std::erase_if(state.releasedFrom,
                [&](const auto& entry) { return !present.contains(entry.first); });
  reporter_.waiting(waiting, present);
  if (waiting.empty()) {
    tellPassDone({}, std::move(backends));
    return true;
  }

  auto write = [this](const json& pod, const JsonPatch& patch) -> Result<void> {
    auto patched =
        client_.patch(resources::kPods, stringAt(pod, {"metadata", "namespace"}),
                      stringAt(pod, {"metadata", "name"}), PatchType::Json, patch.dump());
    if (!patched) {
      return fail(patched.error());
    }
    return {};
  };
  std::optional<std::map<std::string, int>> released;
  auto lookup = [this, &released](const json& pod) { return gangOf(pod, released); };
  bool ok = true;
  const auto outcomes = releaseWaitingPods(waiting, *backends, chooser_, options_.plugins, write,
                                           stop, lookup, options_.parallelReleases);
  for (const auto& outcome : outcomes) {
    if (outcome.kind == PodOutcome::Kind::Released) {
      state.releasedFrom[podUid(*outcome.pod)] =
          stringAt(*outcome.pod, {"metadata", "resourceVersion"});
    }
    if (outcome.kind == PodOutcome::Kind::Failed && !isReleaseConflict(*outcome.error) &&
        !outcome.error->isNotFound()) {
      ok = false;
    }
    reporter_.report(outcome);
  }
  tellPassDone(outcomes, std::move(backends));
  return ok;
}

void WaitingPodController::tellPassDone(const std::vector<PodOutcome>& outcomes,
                                        BackendSnapshot backends) const {
  if (!options_.onPassDone) {
    return;
  }
  std::vector<CapacityDemand> demand;
  for (const auto& outcome : outcomes) {
    if (outcome.kind != PodOutcome::Kind::Waiting || !outcome.forCapacity) {
      continue;
    }
    auto requirements = requirementsFromPod(*outcome.pod);
    const auto created = createdAt(*outcome.pod);
    if (requirements && created != std::chrono::system_clock::time_point::max()) {
      demand.push_back({referenceTo(*outcome.pod, "v1", "Pod"), *requirements, created});
    }
  }
  options_.onPassDone(std::move(demand), std::move(backends));
}

std::optional<Gang> WaitingPodController::gangOf(
    const json& pod, std::optional<std::map<std::string, int>>& released) const {
  const std::string group = stringAt(pod, {"metadata", "annotations", kPodGroupAnnotation});
  if (group.empty()) {
    return std::nullopt;
  }
  const std::string ns = stringAt(pod, {"metadata", "namespace"});
  const ObjectSnapshot podGroup = podGroups_->get(ns, group);
  if (!podGroup) {
    // Without KAI's CRD (or the right to list it) every pod goes alone; with it, a PodGroup
    // the watch has not brought yet is waited for (its add asks for a pass).
    return podGroups_->absent() ? std::nullopt
                                : std::optional(Gang{.name = ns + "/" + group, .unseen = true});
  }
  const json* minMember = memberAt(*podGroup, {"spec", "minMember"});
  if (minMember == nullptr || !minMember->is_number_integer() || minMember->get<int64_t>() <= 1) {
    return std::nullopt;
  }
  if (!released) {
    // Once per pass, for every gang: the members that no longer wait and still run.
    released.emplace();
    for (const auto& other : gvirtusPods_->records()) {
      const std::string otherGroup = other->annotationOr(kPodGroupAnnotation);
      // Not waiting (the gate gone) and still running.
      if (!otherGroup.empty() && !other->gated && !other->deleting() && !other->finished()) {
        ++(*released)[other->ns + "/" + otherGroup];
      }
    }
  }
  const std::string key = ns + "/" + group;
  const auto counted = released->find(key);
  return Gang{key, static_cast<int>(std::min<int64_t>(minMember->get<int64_t>(), 1 << 20)),
              counted != released->end() ? counted->second : 0};
}

}  // namespace gvirtus::webhook
