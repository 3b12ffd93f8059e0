#include "webhook/dra/claim_binder.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "common/base/json_access.h"
#include "common/contract/dra_names.h"
#include "common/telemetry/log.h"
#include "webhook/dra/binding.h"
#include "webhook/dra/slice.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;
using Clock = std::chrono::system_clock;

// Claims wait for room seldom and briefly: one worker answers them in the order they came.
constexpr int kWorkers = 1;
constexpr auto kSyncPoll = std::chrono::milliseconds(200);
// The server-side apply field manager of the binder's entries in status.devices.
constexpr const char* kFieldManager = "gvirtus-webhook-binder";

// The backend pod the device's pool names: "namespace/pod", or the slice's name where that
// was too long for a pool name (webhook/dra/slice.h); null when it is not among `backends`.
const Backend* backendOf(const std::vector<Backend>& backends, const dra::AllocatedDevice& device) {
  auto found = std::ranges::find_if(backends, [&](const Backend& backend) {
    return backend.podRef() == device.pool || sliceName(backend) == device.pool;
  });
  return found == backends.end() ? nullptr : &*found;
}

// What the chooser weighs for a claim: one session. Its GPU memory is kube-scheduler's to
// count (the device's memory capacity against its claims); a claim names no pod, so its
// reservation matches none of a backend's pods and is confirmed once the answer is written.
BackendRequirements sessionOf(const std::string& key) {
  BackendRequirements session;
  session.policy = Policy::LeastConnections;
  session.pod = "resourceclaim:" + key;
  return session;
}

// The answer for a claim whose devices were answered one by one: refused when one is, else
// waiting when one waits, else ready (the first of each kind says why).
BindingDecision claimDecision(const std::vector<BindingDecision>& devices) {
  for (BindingAnswer answer : {BindingAnswer::kRefuse, BindingAnswer::kWait}) {
    auto found = std::ranges::find(devices, answer, &BindingDecision::answer);
    if (found != devices.end()) {
      return *found;
    }
  }
  return devices.front();
}

}  // namespace

BindingStatusApply bindingStatusApply(KubeClient& client) {
  return [&client](const json& status) -> Result<void> {
    WriteOptions options;
    options.fieldManager = kFieldManager;
    options.force = true;
    options.subresource = "status";
    auto applied = client.patch(dra::kResourceClaims, stringAt(status, {"metadata", "namespace"}),
                                stringAt(status, {"metadata", "name"}), PatchType::Apply,
                                status.dump(), options);
    if (!applied) {
      return fail(applied.error());
    }
    return {};
  };
}

bool bindingConditionsServed(KubeClient& client, std::string& whyNot) {
  json probe = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceSlice"},
                {"metadata", {{"name", "gvirtus-binding-conditions-probe"}}},
                {"spec",
                 {{"driver", dra::kDriver},
                  {"pool", {{"name", "binding-conditions-probe"}, {"resourceSliceCount", 1}}},
                  {"allNodes", true},
                  {"devices", json::array({{{"name", "probe"}}})}}}};
  addBindingConditions(probe);
  WriteOptions dryRun;
  dryRun.dryRun = true;
  // The client retries a 429 or a 5xx itself; what still fails leaves the slices without
  // conditions, and the binder answers whatever claims carry them (Leader::makeSlices()).
  auto created = client.create(dra::kResourceSlices, "", probe, dryRun);
  if (!created) {
    whyNot = "cannot try a ResourceSlice with binding conditions (" + created.error().message +
             "; ClusterRole gvirtus-webhook-dra of an older release?)";
    return false;
  }
  const json* kept = memberAt(*created, {"spec", "devices"});
  if (kept == nullptr || !kept->is_array() || kept->empty() ||
      memberAt((*kept)[0], {"bindingConditions"}) == nullptr) {
    whyNot =
        "the API server drops a device's binding conditions (Kubernetes 1.35 or older, or "
        "DRADeviceBindingConditions off)";
    return false;
  }
  return true;
}

ClaimBinder::ClaimBinder(const BackendSource& backends, ObjectCache& claims,
                         BackendChooser& chooser, BindingStatusApply apply,
                         ClaimBinderOptions options)
    : backends_(backends),
      claims_(claims),
      chooser_(chooser),
      apply_(std::move(apply)),
      options_(options),
      leader_(ControllerOptions{.name = "dra-binding",
                                .workers = kWorkers,
                                .backoffInitial = options.backoffInitial,
                                .backoffMax = options.backoffMax,
                                .syncPoll = kSyncPoll},
              [this](const std::string& key) { return sync(key); }) {
  auto own = [this](const json& claim) {
    if (!bindingWait(claim).devices.empty()) {
      leader_.enqueue(cacheKey(claim));
    }
  };
  // A claim deleted waits for nothing: its key, if queued, finds no claim.
  claims_.addHandlers({.onAdd = own,
                       .onUpdate = [own](const json&, const json& now) { own(now); },
                       .onDelete = {}});
}

void ClaimBinder::backendsChanged() {
  std::lock_guard lock(waitingLock_);
  for (const auto& key : waiting_) {
    leader_.enqueue(key);
  }
}

void ClaimBinder::enqueueWaiting() {
  for (const auto& claim : claims_.list()) {
    if (!bindingWait(*claim).devices.empty()) {
      leader_.enqueue(cacheKey(*claim));
    }
  }
}

Result<SyncResult> ClaimBinder::sync(const std::string& key) {
  const auto [ns, name] = splitCacheKey(key);
  const ObjectSnapshot claim = claims_.get(ns, name);
  const BindingWait wait = claim ? bindingWait(*claim) : BindingWait{};
  if (wait.devices.empty()) {
    answered_.erase(key);
    setWaiting(key, false);
    return SyncResult{};
  }
  // Answered already, and the cache has not caught up: asking again would count the session
  // twice.
  const Allocation allocation{stringAt(*claim, {"metadata", "uid"}), wait.allocatedAt};
  if (auto was = answered_.find(key); was != answered_.end() && was->second == allocation) {
    return SyncResult{};
  }
  setWaiting(key, true);
  const auto now = Clock::now();
  const Duration waited =
      wait.allocatedAt ? std::max(Duration::zero(),
                                  std::chrono::duration_cast<Duration>(now - *wait.allocatedAt))
                       : Duration::zero();
  // Every device of the claim is answered at once: the pod binds only when each has room.
  const BackendSnapshot backends = backends_.backends();
  std::vector<Choice> reserved;
  std::vector<BindingDecision> devices;
  for (const auto& device : wait.devices) {
    const Backend* backend = backendOf(*backends, device);
    std::optional<std::string> noRoom;
    if (backend != nullptr && !backend->draining) {
      if (auto chosen = chooser_.choose({*backend}, sessionOf(key), true)) {
        reserved.push_back(*chosen);
      } else {
        noRoom = chosen.error().reason;
      }
    }
    devices.push_back(decideBinding(backend, noRoom, waited, options_.timeout));
  }
  const BindingDecision decision = claimDecision(devices);
  if (decision.answer != BindingAnswer::kReady) {
    for (const auto& choice : reserved) {
      chooser_.cancelAssignment(choice);
    }
    reserved.clear();
  }
  if (decision.answer == BindingAnswer::kWait) {
    tell(*claim, decision);
    // A backend's change queues the claim again; the timeout comes by itself.
    return SyncResult{.requeueAfter = options_.timeout - waited};
  }
  if (auto applied = apply_(bindingStatus(*claim, wait.devices, decision, now)); !applied) {
    for (const auto& choice : reserved) {
      chooser_.cancelAssignment(choice);
    }
    return fail(applied.error().context("answer the binding of ResourceClaim " + key));
  }
  answered_[key] = allocation;
  setWaiting(key, false);
  for (const auto& choice : reserved) {
    chooser_.confirmAssignment(choice);
  }
  tell(*claim, decision);
  log::info(decision.answer == BindingAnswer::kReady
                ? "a claim's backend has room: kube-scheduler may bind its pod"
                : "a claim's backend cannot take it: kube-scheduler allocates it again",
            {{"claim", key}, {"reason", decision.reason}, {"detail", decision.message}});
  return SyncResult{};
}

void ClaimBinder::setWaiting(const std::string& key, bool waits) {
  std::lock_guard lock(waitingLock_);
  if (waits) {
    waiting_.insert(key);
  } else {
    waiting_.erase(key);
  }
}

void ClaimBinder::tell(const json& claim, const BindingDecision& decision) {
  if (options_.events == nullptr) {
    return;
  }
  const auto [type, reason] =
      decision.answer == BindingAnswer::kReady  ? std::pair{EventType::Normal, "BackendReady"}
      : decision.answer == BindingAnswer::kWait ? std::pair{EventType::Normal, "WaitingForBackend"}
                                                : std::pair{EventType::Warning, "BackendRefused"};
  options_.events->record(referenceTo(claim, "resource.k8s.io/v1", "ResourceClaim"), type, reason,
                          decision.message);
}

void ClaimBinder::run(std::stop_token stop) {
  log::info("DRA claim binder started", {{"driver", dra::kDriver}});
  leader_.run(stop, {.synced = [this] { return backends_.ready() && claims_.hasSynced(); },
                     .enqueueAll = [this] { enqueueWaiting(); }});
  log::info("DRA claim binder stopped");
}

}  // namespace gvirtus::webhook
