#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/cache/object_cache.h"
#include "common/controller/event_recorder.h"
#include "webhook/release/pass.h"

// What the waiting-pod controller's passes tell: the pods' Events, the log lines and the
// release metrics. Kept apart from the controller so that a pass only decides.
namespace gvirtus::webhook {

class WebhookMetrics;

// Event reasons on the pod.
inline constexpr const char* kWaitingForBackendReason = "WaitingForBackend";
inline constexpr const char* kBackendAssignedReason = "BackendAssigned";
// A Warning: the pod carries the gate gvirtus.io/backend, but the webhook did not wire it.
inline constexpr const char* kNotWiredReason = "NotWiredByWebhook";

class ReleaseReporter {
 public:
  // Since when the backend at an endpoint ("IP:PORT") has offered what it offers now;
  // nullopt when not known. A release's latency counts from then, or from the pod's
  // creation when that is later.
  using OfferedSince =
      std::function<std::optional<std::chrono::system_clock::time_point>(const std::string&)>;

  // `metrics` may be null. Both must outlive the reporter.
  ReleaseReporter(EventRecorder& events, WebhookMetrics* metrics, OfferedSince offeredSince);

  // The waiting pods of a pass, oldest first: the gauges, and the pods told before that no
  // longer wait are forgotten (if one waits again, it is told again).
  void waiting(const std::vector<ObjectSnapshot>& pods, const std::set<std::string>& uids);
  // One pod's outcome: WaitingForBackend when its reason changed (back to an earlier one
  // too: `kubectl gvirtus why` shows the latest Event, which must be the current reason),
  // BackendAssigned with the release latency, NotWiredByWebhook once per reason.
  void report(const PodOutcome& outcome);
  // A new run: nothing told yet.
  void reset() { told_.clear(); }

 private:
  EventRecorder& events_;
  WebhookMetrics* metrics_;
  OfferedSince offeredSince_;
  // By pod UID: the reason last told.
  std::map<std::string, std::string> told_;
};

}  // namespace gvirtus::webhook
