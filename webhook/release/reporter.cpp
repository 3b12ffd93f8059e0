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

void ReleaseReporter::waits(const json& pod) {
  if (!gatedByWebhook(pod)) {
    return;  // it waits for nothing the webhook can give: not counted
  }
  const std::string uid = podUid(pod);
  std::lock_guard lock(mutex_);
  if (waitingSince_.contains(uid)) {
    return;
  }
  const auto since = createdAt(pod);
  waitingSince_.emplace(uid, since);
  waiting_.emplace(since, uid);
  setGaugesLocked();
}

void ReleaseReporter::noLongerWaits(const std::string& uid) {
  std::lock_guard lock(mutex_);
  told_.erase(uid);
  auto it = waitingSince_.find(uid);
  if (it == waitingSince_.end()) {
    return;
  }
  waiting_.erase({it->second, uid});
  waitingSince_.erase(it);
  setGaugesLocked();
}

bool ReleaseReporter::tellOnce(const std::string& uid, const std::string& reason) {
  std::lock_guard lock(mutex_);
  std::string& told = told_[uid];
  if (told == reason) {
    return false;
  }
  told = reason;
  return true;
}

void ReleaseReporter::refreshGauges() {
  std::lock_guard lock(mutex_);
  setGaugesLocked();
}

void ReleaseReporter::reset() {
  std::lock_guard lock(mutex_);
  told_.clear();
  waitingSince_.clear();
  waiting_.clear();
  setGaugesLocked();
}

void ReleaseReporter::setGaugesLocked() {
  if (metrics_ == nullptr) {
    return;
  }
  // The oldest's age, when its creation time is known.
  std::chrono::seconds oldest{0};
  if (!waiting_.empty() &&
      waiting_.begin()->first != std::chrono::system_clock::time_point::max()) {
    oldest = std::max(std::chrono::seconds(0),
                      std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now() - waiting_.begin()->first));
  }
  metrics_->waitingPods(static_cast<double>(waiting_.size()), oldest);
}

void ReleaseReporter::report(const PodOutcome& outcome) {
  const json& pod = *outcome.pod;
  const ObjectReference ref = referenceTo(pod, "v1", "Pod");
  const std::string key = cacheKey(pod);
  switch (outcome.kind) {
    case PodOutcome::Kind::Waiting: {
      if (!tellOnce(podUid(pod), outcome.reason)) {
        return;
      }
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
      if (!tellOnce(podUid(pod), outcome.reason)) {
        return;
      }
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
