#include "webhook/release/reporter.h"

#include <algorithm>

#include "common/cache/object_cache.h"
#include "common/telemetry/log.h"
#include "webhook/base/metrics.h"
#include "webhook/pods/pod_wiring.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

double milliseconds(std::chrono::system_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

ReleaseReporter::ReleaseReporter(EventRecorder& events, WebhookMetrics* metrics,
                                 OfferedSince offeredSince)
    : events_(events), metrics_(metrics), offeredSince_(std::move(offeredSince)) {}

void ReleaseReporter::waiting(const std::vector<ObjectSnapshot>& pods,
                              const std::set<std::string>& uids) {
  std::erase_if(told_, [&](const auto& entry) { return !uids.contains(entry.first); });
  if (metrics_ == nullptr) {
    return;
  }
  // Oldest first: the front's age, when its creation time is known. Pods the webhook did
  // not gate wait for nothing it can give: not counted.
  std::chrono::seconds oldest{0};
  const json* front = nullptr;
  double count = 0;
  for (const auto& pod : pods) {
    if (gatedByWebhook(*pod)) {
      front = front != nullptr ? front : pod.get();
      ++count;
    }
  }
  if (front != nullptr) {
    if (const auto created = createdAt(*front);
        created != std::chrono::system_clock::time_point::max()) {
      oldest = std::max(std::chrono::seconds(0), std::chrono::duration_cast<std::chrono::seconds>(
                                                     std::chrono::system_clock::now() - created));
    }
  }
  metrics_->waitingPods(count, oldest);
}

void ReleaseReporter::report(const PodOutcome& outcome) {
  const json& pod = *outcome.pod;
  const ObjectReference ref = referenceTo(pod, "v1", "Pod");
  const std::string key = cacheKey(pod);
  switch (outcome.kind) {
    case PodOutcome::Kind::Waiting: {
      std::string& told = told_[podUid(pod)];
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
      if (auto since = offeredSince_(backend.endpoint())) {
        latency = std::max(std::chrono::system_clock::duration::zero(),
                           outcome.at - std::max(*since, createdAt(pod)));
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
      std::string& told = told_[podUid(pod)];
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
