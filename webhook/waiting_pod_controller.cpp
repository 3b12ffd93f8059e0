#include "webhook/waiting_pod_controller.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "common/json_access.h"
#include "common/kube_resource.h"
#include "common/log.h"
#include "common/pod_status.h"
#include "common/resource_cache.h"
#include "common/time_text.h"
#include "webhook/backend_requirements.h"
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
         backendGateIndex(pod).has_value();
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
    if (stringAt(pod, {"metadata", "annotations", kBackendPodAnnotation}) == backend.podRef() &&
        stringAt(pod, {"metadata", "deletionTimestamp"}).empty() && !podFinished(pod)) {
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
        const bool deleted = !stringAt(other, {"metadata", "deletionTimestamp"}).empty();
        if (stringAt(other, {"metadata", "annotations", kPodGroupAnnotation}) == group &&
            !isWaiting(other) && !deleted && !podFinished(other)) {
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
      // Told when the reason changes, back to an earlier one too: `kubectl gvirtus why`
      // shows the latest Event, which must be the pod's current reason.
      std::string& told = state.told[podUid(pod)];
      if (told == outcome.reason) {
        return;
      }
      told = outcome.reason;
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
      std::string& told = state.told[podUid(pod)];
      if (told == outcome.reason) {
        return;
      }
      told = outcome.reason;
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
