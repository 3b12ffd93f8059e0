#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/cache/object_cache.h"
#include "common/controller/event_recorder.h"
#include "webhook/release/pass.h"

// What the waiting-pod controller's syncs tell: the pods' Events, the log lines and the
// release metrics. Kept apart from the controller so that a sync only decides.
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

  // A pod seen waiting (its unit synced): counted in the gauges while the webhook gated it.
  void waits(const nlohmann::json& pod);
  // A pod released, gone or no longer gated: out of the gauges, and what it was told is
  // forgotten (if it waits again, it is told again).
  void noLongerWaits(const std::string& uid);
  // One pod's outcome: WaitingForBackend when its reason changed (back to an earlier one
  // too: `kubectl gvirtus why` shows the latest Event, which must be the current reason),
  // BackendAssigned with the release latency, NotWiredByWebhook once per reason.
  void report(const PodOutcome& outcome);
  // The oldest waiting pod's age grows without any change: the resync refreshes it.
  void refreshGauges();
  // A new run: nothing told, nothing waiting.
  void reset();

 private:
  EventRecorder& events_;
  WebhookMetrics* metrics_;
  OfferedSince offeredSince_;
  // True when `reason` is not what the pod was told last; it is now.
  bool tellOnce(const std::string& uid, const std::string& reason);
  // Refreshes the gauges from waiting_; the caller holds mutex_.
  void setGaugesLocked();

  // Several release units are synced at once.
  std::mutex mutex_;
  // By pod UID: the reason last told.
  std::map<std::string, std::string> told_;
  // By pod UID: since when each waiting pod the webhook gated waits, and the same ordered.
  std::map<std::string, std::chrono::system_clock::time_point> waitingSince_;
  std::set<std::pair<std::chrono::system_clock::time_point, std::string>> waiting_;
};

}  // namespace gvirtus::webhook
