#include "webhook/autoscale/controller.h"

#include <string>

#include "common/base/json_access.h"
#include "common/cache/resource_cache.h"
#include "common/contract/pod_status.h"
#include "common/kube/api/resource.h"
#include "common/telemetry/log.h"
#include "webhook/base/metrics.h"
#include "webhook/base/names.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// The one key of the queue: a step looks at every candidate and all the demand.
constexpr const char* kStepKey = "step";
// A step also runs this long after the last one when the autoscaler names no time: a
// backend's idle time and a pod's wait grow without any event.
constexpr auto kResync = std::chrono::seconds(10);

}  // namespace

AutoscaleController::AutoscaleController(KubeClient& client, const GvirtusPodStore& gvirtusPods,
                                         EventRecorder& events, WebhookMetrics* metrics,
                                         AutoscaleOptions options)
    : client_(client),
      gvirtusPods_(gvirtusPods),
      metrics_(metrics),
      options_(options),
      autoscaler_(std::move(options), actions(events)),
      leader_(ControllerOptions{.name = "autoscaler",
                                .backoffInitial = std::chrono::milliseconds(500),
                                .backoffMax = std::chrono::seconds(30)},
              [this](const std::string&) { return step(); }),
      candidates_(client, resources::kNodes, "", options_.candidates) {
  auto ask = [this] { leader_.enqueue(kStepKey); };
  candidates_.addHandlers({.onAdd = [ask](const json&) { ask(); },
                           .onUpdate = [ask](const json&, const json&) { ask(); },
                           .onDelete = [ask](const json&) { ask(); }});
}

AutoscalerActions AutoscaleController::actions(EventRecorder& events) {
  AutoscalerActions out;
  out.patchNode = [this](const std::string& node, const JsonPatch& patch) {
    return client_.patch(resources::kNodes, "", node, PatchType::Json, patch.dump());
  };
  out.assignedPods = [this](const Backend& backend) { return assignedPods(backend); };
  out.event = [&events](const ObjectReference& object, const std::string& reason,
                        const std::string& message) {
    events.record(object, EventType::Normal, reason, message);
  };
  return out;
}

Result<int64_t> AutoscaleController::assignedPods(const Backend& backend) const {
  int64_t count = 0;
  for (const auto& pod : gvirtusPods_.records()) {
    if (pod->annotationOr(kBackendPodAnnotation) == backend.podRef() && !pod->deleting() &&
        !pod->finished()) {
      ++count;
    }
  }
  return count;
}

void AutoscaleController::demandSeen(std::vector<CapacityDemand> demand, BackendSnapshot backends) {
  {
    std::lock_guard lock(mutex_);
    lastDemand_ = DemandSeen{std::move(demand), std::move(backends)};
  }
  leader_.enqueue(kStepKey);
}

Result<SyncResult> AutoscaleController::step() {
  std::vector<json> nodes;
  for (const auto& node : candidates_.list()) {
    nodes.push_back(*node);
  }
  std::optional<DemandSeen> seen;
  {
    std::lock_guard lock(mutex_);
    seen = lastDemand_;
  }
  if (!seen) {
    return SyncResult{};  // the term's first tell enqueues the first step
  }
  const auto nextLook = autoscaler_.step(nodes, *seen->backends, seen->demand);
  if (metrics_ != nullptr) {
    const AutoscaleStatus& status = autoscaler_.status();
    metrics_->autoscaled(static_cast<double>(status.wanted), static_cast<double>(status.autoscaled),
                         static_cast<double>(status.due), status.optedIn, status.optedOut);
  }
  return SyncResult{.requeueAfter = std::min<Duration>(kResync, nextLook.value_or(kResync))};
}

void AutoscaleController::run(std::stop_token stop) {
  autoscaler_.reset();
  {
    std::lock_guard lock(mutex_);
    lastDemand_.reset();  // the waiting-pod controller's first tell of this term comes again
  }
  candidates_.start();
  log::info("autoscale controller started", {{"candidates", options_.candidates}});
  leader_.run(stop,
              {.synced = [this] { return candidates_.hasSynced() && gvirtusPods_.hasSynced(); },
               .enqueueAll = [this] { leader_.enqueue(kStepKey); }});
  log::info("autoscale controller stopped");
}

}  // namespace gvirtus::webhook
