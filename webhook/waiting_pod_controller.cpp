#include "webhook/waiting_pod_controller.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "common/json_access.h"
#include "common/kube_resource.h"
#include "common/log.h"
#include "common/parallel.h"
#include "common/resource_cache.h"
#include "webhook/backend_requirements.h"
#include "webhook/gvirtus_properties.h"
#include "webhook/metrics.h"
#include "webhook/names.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// The one key of the controller's queue: every change asks for a pass over all waiting
// pods, since which pod gets a backend depends on the others (oldest first, capacity).
constexpr const char* kPassKey = "pass";
// How often run() looks again while the caches have not synced yet.
constexpr auto kSyncPoll = std::chrono::milliseconds(200);

// The index of the gate gvirtus.io/backend in spec.schedulingGates.
std::optional<size_t> gateIndex(const json& pod) {
  const json* spec = member(pod, "spec");
  const json* gates = spec != nullptr ? member(*spec, "schedulingGates") : nullptr;
  if (gates == nullptr || !gates->is_array()) {
    return std::nullopt;
  }
  for (size_t i = 0; i < gates->size(); ++i) {
    if (stringAt((*gates)[i], {"name"}) == kSchedulingGate) {
      return i;
    }
  }
  return std::nullopt;
}

SystemTime createdAt(const json& pod) {
  auto parsed = parseRfc3339(stringAt(pod, {"metadata", "creationTimestamp"}));
  return parsed ? *parsed : SystemTime::max();
}

std::string podKey(const json& pod) {
  return stringAt(pod, {"metadata", "namespace"}) + "/" + stringAt(pod, {"metadata", "name"});
}

std::string podUid(const json& pod) {
  const std::string uid = stringAt(pod, {"metadata", "uid"});
  return uid.empty() ? podKey(pod) : uid;
}

// KAI-Scheduler's PodGroups: read to learn a gang's minMember.
const KubeResource kPodGroups{"scheduling.run.ai", "v2alpha2", "podgroups", true};

double milliseconds(std::chrono::system_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

bool isWaiting(const json& pod) {
  const json* metadata = member(pod, "metadata");
  return metadata != nullptr && member(*metadata, "deletionTimestamp") == nullptr &&
         gateIndex(pod).has_value();
}

std::vector<json> waitingPods(const std::vector<ObjectSnapshot>& pods) {
  std::vector<std::tuple<SystemTime, std::string, const json*>> ranked;
  for (const auto& pod : pods) {
    if (isWaiting(*pod)) {
      ranked.emplace_back(createdAt(*pod), podKey(*pod), pod.get());
    }
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  std::vector<json> out;
  out.reserve(ranked.size());
  for (const auto& entry : ranked) {
    out.push_back(*std::get<2>(entry));
  }
  return out;
}

JsonPatch releasePatch(const json& pod, const Assignment& assignment) {
  JsonPatch patch;
  const std::string resourceVersion = stringAt(pod, {"metadata", "resourceVersion"});
  if (!resourceVersion.empty()) {
    patch.test(jsonPointer({"metadata", "resourceVersion"}), resourceVersion);
  }
  if (auto index = gateIndex(pod)) {
    patch.test(jsonPointer({"spec", "schedulingGates", std::to_string(*index), "name"}),
               std::string(kSchedulingGate));
  }
  json released = pod;
  assignBackend(released, assignment);
  patch.append(JsonPatch::between(pod, released));
  return patch;
}

bool isReleaseConflict(const Error& error) {
  return error.isConflict() ||
         (error.httpStatus == 422 && error.message.find("test") != std::string::npos);
}

namespace {

// One unit of a pass: a pod alone, or the waiting members of a gang.
struct ReleaseUnit {
  std::vector<const json*> pods;
  std::optional<Gang> gang;
};

// The pass's units in the order of their oldest pod (`waiting` is oldest first).
std::vector<ReleaseUnit> releaseUnits(const std::vector<const json*>& waiting,
                                      const GangLookup& gangOf) {
  std::vector<ReleaseUnit> units;
  std::map<std::string, size_t> unitOfGang;
  for (const json* pod : waiting) {
    std::optional<Gang> gang = gangOf ? gangOf(*pod) : std::nullopt;
    if (!gang || gang->minMember <= 1) {
      units.push_back({{pod}, std::nullopt});
      continue;
    }
    auto [it, added] = unitOfGang.emplace(gang->name, units.size());
    if (added) {
      units.push_back({{}, std::move(gang)});
    }
    units[it->second].pods.push_back(pod);
  }
  return units;
}

// A pod that waits, and why.
PodOutcome waits(const json& pod, std::string reason, bool forCapacity) {
  PodOutcome outcome;
  outcome.pod = pod;
  outcome.reason = std::move(reason);
  outcome.forCapacity = forCapacity;
  return outcome;
}

}  // namespace

std::vector<PodOutcome> releaseWaitingPods(const std::vector<json>& waiting,
                                           const std::vector<Backend>& backends,
                                           BackendChooser& chooser,
                                           const std::vector<std::string>& plugins,
                                           const ReleaseWriter& write, std::stop_token stop,
                                           const GangLookup& gangOf, size_t parallelWrites) {
  const std::vector<std::string>& wanted = plugins.empty() ? defaultPlugins() : plugins;
  std::vector<PodOutcome> outcomes;
  // Releases chosen but not written yet: outcomes[index] waits for its write's result.
  struct PendingRelease {
    size_t index;
    JsonPatch patch;
  };
  std::vector<PendingRelease> pending;
  // Only pods the webhook wired and gated: a pod created with the gate but without the label,
  // and labelled later, was never wired, and would reach a backend without the webhook's
  // checks.
  std::vector<const json*> wired;
  for (const auto& pod : waiting) {
    if (gatedByWebhook(pod)) {
      wired.push_back(&pod);
      continue;
    }
    PodOutcome refused;
    refused.kind = PodOutcome::Kind::Refused;
    refused.pod = pod;
    refused.reason = "it carries the scheduling gate " + std::string(kSchedulingGate) +
                     " but was not wired by the GVirtuS webhook at creation (no " +
                     std::string(kEnabledLabel) +
                     "=true label then); it is not given a backend: delete it and create it "
                     "with the label";
    outcomes.push_back(std::move(refused));
  }
  // Writes what is pending, up to parallelWrites at once; a failed write gives its backend
  // back, to the pods chosen for after this.
  auto writePending = [&] {
    std::vector<Result<void>> written(pending.size());
    forEachParallel(pending.size(), parallelWrites, [&](size_t i) {
      written[i] = write(outcomes[pending[i].index].pod, pending[i].patch);
    });
    for (size_t i = 0; i < pending.size(); ++i) {
      PodOutcome& outcome = outcomes[pending[i].index];
      if (written[i]) {
        outcome.kind = PodOutcome::Kind::Released;
        outcome.at = std::chrono::system_clock::now();
      } else {
        chooser.cancelAssignment(*outcome.choice);
        outcome.error = written[i].error();
      }
    }
    pending.clear();
  };
  for (const auto& unit : releaseUnits(wired, gangOf)) {
    if (stop.stop_requested()) {
      break;
    }
    // Choose for every pod of the unit before writing any: a gang goes whole or not at all.
    std::vector<Choice> choices;
    std::string reason;
    bool forCapacity = false;
    const int members = static_cast<int>(unit.pods.size()) + (unit.gang ? unit.gang->others : 0);
    if (unit.gang && members < unit.gang->minMember) {
      reason = "gang " + unit.gang->name + " has " + std::to_string(members) + " of its " +
               std::to_string(unit.gang->minMember) + " pods";
    }
    for (const json* pod : unit.pods) {
      if (!reason.empty()) {
        break;
      }
      auto requirements = requirementsFromPod(*pod);
      ChooseResult choice =
          requirements ? chooser.choose(backends, *requirements, true)
                       : ChooseResult(std::unexpect, NoBackend{requirements.error().message});
      if (choice) {
        // The pod exists: its assignment counts for the whole window, not only for the short
        // life of one made at admission for a pod that may never appear.
        chooser.confirmAssignment(*choice);
        choices.push_back(std::move(*choice));
        continue;
      }
      forCapacity = requirements.has_value();
      if (!unit.gang) {
        reason = choice.error().reason;
      } else {
        reason = "gang " + unit.gang->name + " is released whole and only " +
                 std::to_string(choices.size()) + " of its " + std::to_string(unit.pods.size()) +
                 " waiting pods can get a backend (" + choice.error().reason + ")";
      }
    }
    if (!reason.empty()) {
      for (const auto& choice : choices) {
        chooser.cancelAssignment(choice);
      }
      for (const json* pod : unit.pods) {
        outcomes.push_back(waits(*pod, reason, forCapacity));
      }
      continue;
    }
    for (size_t i = 0; i < unit.pods.size(); ++i) {
      const json& pod = *unit.pods[i];
      Choice& choice = choices[i];
      PodOutcome outcome;
      outcome.pod = pod;
      outcome.kind = PodOutcome::Kind::Failed;
      auto properties = renderProperties(choice.backend.ip, choice.backend.port, wanted);
      if (properties) {
        pending.push_back(
            {outcomes.size(), releasePatch(pod, {.endpoint = choice.backend.endpoint(),
                                                 .backendPod = choice.backend.podRef(),
                                                 .properties = *properties,
                                                 .preferredZone = choice.preferredZone,
                                                 .gpuIndex = choice.gpuIndex,
                                                 .assignedBy = chooser.instance()})});
      } else {
        chooser.cancelAssignment(choice);
        outcome.error = properties.error();
      }
      outcome.choice = std::move(choice);
      outcomes.push_back(std::move(outcome));
    }
    if (pending.size() >= std::max<size_t>(parallelWrites, 1)) {
      writePending();
    }
  }
  writePending();
  return outcomes;
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
      options_(std::move(options)) {
  if (options_.autoscale.enabled()) {
    AutoscalerActions actions;
    actions.patchNode = [this](const std::string& node, const JsonPatch& patch) {
      return client_.patch(resources::kNodes, "", node, PatchType::Json, patch.dump());
    };
    actions.assignedPods = [this](const Backend& backend) { return assignedPods(backend); };
    actions.event = [this](const ObjectReference& object, const std::string& reason,
                           const std::string& message) {
      events_.record(object, EventType::Normal, reason, message);
    };
    autoscaler_ = std::make_unique<BackendAutoscaler>(options_.autoscale, std::move(actions));
  }
}

void WaitingPodController::backendsChanged() {
  const auto now = std::chrono::system_clock::now();
  const auto backends = backends_.backends();
  std::lock_guard lock(mutex_);
  std::map<std::string, Offer> next;
  for (const auto& backend : *backends) {
    Backend seen = backend;
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

void WaitingPodController::run(std::stop_token stop) {
  // Unscheduled GVirtuS pods outside the webhook's namespace: a released pod leaves the
  // cache once the scheduler binds it.
  std::string fieldSelector = "spec.nodeName=";
  if (!options_.ownNamespace.empty()) {
    fieldSelector += ",metadata.namespace!=" + options_.ownNamespace;
  }
  ResourceCache pods(client_, resources::kPods, "", std::string(kEnabledLabel) + "=true",
                     fieldSelector);
  // The autoscaler's candidate GPU nodes: a change of one (an operator's edit, our own
  // write) asks for a pass too.
  std::unique_ptr<ResourceCache> candidates;
  if (autoscaler_) {
    autoscaler_->reset();
    candidates = std::make_unique<ResourceCache>(client_, resources::kNodes, "",
                                                 options_.autoscale.candidates);
  }

  RunState state;
  auto controller = std::make_shared<Controller>(
      ControllerOptions{.name = "waiting-pods",
                        .backoffInitial = std::chrono::milliseconds(500),
                        .backoffMax = std::chrono::seconds(30),
                        .syncPoll = kSyncPoll},
      [&, stop](const std::string&) -> Result<SyncResult> {
        state.nextLook.reset();
        std::vector<json> candidateNodes;
        if (candidates) {
          for (const auto& node : candidates->list()) {
            candidateNodes.push_back(*node);
          }
        }
        const bool ok = pass(stop, pods.list(), candidateNodes, state);
        if (metrics_ != nullptr) {
          metrics_->passDone();
        }
        if (!ok) {
          return fail("a waiting pod could not be released (logged above)");
        }
        // Load reports age and own assignments expire without any event: look again.
        return SyncResult{.requeueAfter =
                              std::min(options_.resync, state.nextLook.value_or(options_.resync))};
      });
  {
    std::lock_guard lock(mutex_);
    controller_ = controller;
  }
  pods.addHandlers(controller->enqueueOnAnyChange(kPassKey));
  pods.start();
  if (candidates) {
    candidates->addHandlers(controller->enqueueOnAnyChange(kPassKey));
    candidates->start();
  }
  log::info("waiting-pod controller started",
            {{"excludedNamespace", options_.ownNamespace},
             {"autoscaleCandidates", options_.autoscale.candidates}});
  controller->enqueue(kPassKey);
  controller->run(stop, [&] {
    return pods.hasSynced() && backends_.ready() && (!candidates || candidates->hasSynced());
  });

  // The caches stop before the controller goes: their handlers enqueue on it.
  if (candidates) {
    candidates->stop();
  }
  pods.stop();
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
                                const std::vector<json>& candidates, RunState& state) {
  std::vector<json> waiting;
  std::set<std::string> present;
  for (auto& pod : waitingPods(pods)) {
    const std::string uid = podUid(pod);
    present.insert(uid);
    // Released by us, and the cache has not caught up yet: the patch's test would fail.
    auto released = state.releasedFrom.find(uid);
    if (released != state.releasedFrom.end() &&
        released->second == stringAt(pod, {"metadata", "resourceVersion"})) {
      continue;
    }
    waiting.push_back(std::move(pod));
  }
  // A pod deleted, or released, is forgotten.
  std::erase_if(state.told, [&](const auto& entry) { return !present.contains(entry.first); });
  std::erase_if(state.releasedFrom,
                [&](const auto& entry) { return !present.contains(entry.first); });
  if (metrics_ != nullptr) {
    // Oldest first: the front's age, when its creation time is known. Pods the webhook did not
    // gate wait for nothing it can give: not counted.
    std::chrono::seconds oldest{0};
    const json* front = nullptr;
    double count = 0;
    for (const auto& pod : waiting) {
      if (gatedByWebhook(pod)) {
        front = front != nullptr ? front : &pod;
        ++count;
      }
    }
    if (front != nullptr) {
      if (const SystemTime created = createdAt(*front); created != SystemTime::max()) {
        oldest = std::max(std::chrono::seconds(0), std::chrono::duration_cast<std::chrono::seconds>(
                                                       std::chrono::system_clock::now() - created));
      }
    }
    metrics_->waitingPods(count, oldest);
  }
  if (waiting.empty()) {
    autoscale({}, candidates, state);
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
  std::map<std::string, std::optional<Gang>> gangs;
  auto lookup = [this, &gangs](const json& pod) { return gangOf(pod, gangs); };
  bool ok = true;
  const auto outcomes =
      releaseWaitingPods(waiting, *backends_.backends(), chooser_, options_.plugins, write, stop,
                         lookup, options_.parallelReleases);
  for (const auto& outcome : outcomes) {
    if (outcome.kind == PodOutcome::Kind::Released) {
      state.releasedFrom[podUid(outcome.pod)] =
          stringAt(outcome.pod, {"metadata", "resourceVersion"});
    }
    if (outcome.kind == PodOutcome::Kind::Failed && !isReleaseConflict(*outcome.error) &&
        !outcome.error->isNotFound()) {
      ok = false;
    }
    report(outcome, state);
  }
  autoscale(outcomes, candidates, state);
  return ok;
}

void WaitingPodController::autoscale(const std::vector<PodOutcome>& outcomes,
                                     const std::vector<json>& candidates, RunState& state) {
  if (!autoscaler_) {
    return;
  }
  std::vector<CapacityDemand> demand;
  for (const auto& outcome : outcomes) {
    if (outcome.kind != PodOutcome::Kind::Waiting || !outcome.forCapacity) {
      continue;
    }
    auto requirements = requirementsFromPod(outcome.pod);
    const SystemTime created = createdAt(outcome.pod);
    if (requirements && created != SystemTime::max()) {
      demand.push_back({referenceTo(outcome.pod, "v1", "Pod"), *requirements, created});
    }
  }
  state.nextLook = autoscaler_->step(candidates, *backends_.backends(), demand);
  if (metrics_ != nullptr) {
    const AutoscaleStatus& status = autoscaler_->status();
    metrics_->autoscaled(static_cast<double>(status.wanted), static_cast<double>(status.autoscaled),
                         static_cast<double>(status.due), status.optedIn, status.optedOut);
  }
}

Result<int64_t> WaitingPodController::assignedPods(const Backend& backend) {
  ListOptions options;
  options.labelSelector = std::string(kEnabledLabel) + "=true";
  auto pods = client_.listAll(resources::kPods, "", options);
  if (!pods) {
    return fail(pods.error());
  }
  int64_t count = 0;
  for (const auto& pod : pods->items) {
    const std::string phase = stringAt(pod, {"status", "phase"});
    if (stringAt(pod, {"metadata", "annotations", kBackendPodAnnotation}) == backend.podRef() &&
        stringAt(pod, {"metadata", "deletionTimestamp"}).empty() && phase != "Succeeded" &&
        phase != "Failed") {
      ++count;
    }
  }
  return count;
}

std::optional<Gang> WaitingPodController::gangOf(const json& pod,
                                                 std::map<std::string, std::optional<Gang>>& seen) {
  const std::string group = stringAt(pod, {"metadata", "annotations", kPodGroupAnnotation});
  if (group.empty()) {
    return std::nullopt;
  }
  const std::string ns = stringAt(pod, {"metadata", "namespace"});
  const std::string key = ns + "/" + group;
  if (auto it = seen.find(key); it != seen.end()) {
    return it->second;
  }
  std::optional<Gang> gang;
  // Without KAI's CRD, or without the right to read it, every pod goes alone.
  auto podGroup = client_.get(kPodGroups, ns, group);
  const json* spec = podGroup ? member(*podGroup, "spec") : nullptr;
  const json* minMember = spec != nullptr ? member(*spec, "minMember") : nullptr;
  if (minMember != nullptr && minMember->is_number_integer() && minMember->get<int64_t>() > 1) {
    gang = Gang{key, static_cast<int>(std::min<int64_t>(minMember->get<int64_t>(), 1 << 20)), 0};
    ListOptions options;
    options.labelSelector = std::string(kEnabledLabel) + "=true";
    if (auto pods = client_.listAll(resources::kPods, ns, options)) {
      for (const auto& other : pods->items) {
        const std::string phase = stringAt(other, {"status", "phase"});
        const bool deleted = !stringAt(other, {"metadata", "deletionTimestamp"}).empty();
        if (stringAt(other, {"metadata", "annotations", kPodGroupAnnotation}) == group &&
            !isWaiting(other) && !deleted && phase != "Succeeded" && phase != "Failed") {
          ++gang->others;
        }
      }
    }
  } else if (!podGroup && !podGroup.error().isNotFound()) {
    log::debug("cannot read the pod's PodGroup; the pod goes alone",
               {{"podGroup", key}, {"error", podGroup.error().message}});
  }
  seen.emplace(key, gang);
  return gang;
}

void WaitingPodController::report(const PodOutcome& outcome, RunState& state) {
  const json& pod = outcome.pod;
  const ObjectReference ref = referenceTo(pod, "v1", "Pod");
  const std::string key = podKey(pod);
  switch (outcome.kind) {
    case PodOutcome::Kind::Waiting: {
      auto& told = state.told[podUid(pod)];
      if (std::find(told.begin(), told.end(), outcome.reason) != told.end()) {
        return;
      }
      told.push_back(outcome.reason);
      log::info("pod waits for a backend", {{"pod", key}, {"reason", outcome.reason}});
      events_.record(ref, EventType::Normal, kWaitingForBackendReason,
                     "Waiting for a GVirtuS backend: " + outcome.reason);
      return;
    }
    case PodOutcome::Kind::Released: {
      const Backend& backend = outcome.choice->backend;
      std::optional<std::chrono::system_clock::duration> latency;
      {
        std::lock_guard lock(mutex_);
        if (auto it = offers_.find(backend.endpoint()); it != offers_.end()) {
          latency = outcome.at - std::max(it->second.since, createdAt(pod));
        }
      }
      if (latency && *latency < std::chrono::system_clock::duration::zero()) {
        latency = std::chrono::system_clock::duration::zero();
      }
      if (metrics_ != nullptr) {
        metrics_->released(latency);
      }
      json fields = {{"pod", key},
                     {"backend", backend.endpoint()},
                     {"backendPod", backend.podRef()},
                     {"policy", policyName(outcome.choice->policy)}};
      if (latency) {
        fields["sinceBackendReadyMs"] = milliseconds(*latency);
      }
      log::info("pod released to a backend", fields);
      std::string message = "Assigned GVirtuS backend " + backend.endpoint();
      if (!backend.podRef().empty()) {
        message += " (pod " + backend.podRef() + ")";
      }
      // A WaitingForBackend Event still queued is no longer true: it is not written.
      events_.withdraw(ref, kWaitingForBackendReason);
      events_.record(ref, EventType::Normal, kBackendAssignedReason, message);
      return;
    }
    case PodOutcome::Kind::Refused: {
      auto& told = state.told[podUid(pod)];
      if (std::find(told.begin(), told.end(), outcome.reason) != told.end()) {
        return;
      }
      told.push_back(outcome.reason);
      log::warn("gated pod not wired by the webhook; not released", {{"pod", key}});
      events_.record(ref, EventType::Warning, kNotWiredReason,
                     "Not given a GVirtuS backend: " + outcome.reason);
      return;
    }
    case PodOutcome::Kind::Failed: {
      const Error& error = *outcome.error;
      if (isReleaseConflict(error) || error.isNotFound()) {
        log::debug("pod changed while being released; trying again",
                   {{"pod", key}, {"error", error.message}});
      } else {
        log::warn("cannot release pod; retrying with backoff",
                  {{"pod", key}, {"error", error.message}});
      }
      return;
    }
  }
}

}  // namespace gvirtus::webhook
