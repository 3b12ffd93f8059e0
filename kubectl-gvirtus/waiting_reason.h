#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kubectl-gvirtus/pod_events.h"
#include "kubectl-gvirtus/pod_facts.h"

// Why a pod waits: the reason of the waiting-pod controller's latest pass, as its latest
// WaitingForBackend Event holds it, weighed against the backends seen now. The Event may
// predate the current state (it is written when the reason changes, and not at all while
// no webhook replica leads): the plugin says so instead of repeating an old reason as news.
namespace gvirtus::kubectl_gvirtus {

// The backends seen now.
struct BackendCount {
  int64_t ready = 0;
  int64_t total = 0;
  // The ready backend that became Ready last, and when.
  std::string lastReadyName;
  std::optional<TimePoint> lastReadyAt;
};

struct WaitingReason {
  enum class Staleness {
    Current,          // nothing seen since contradicts it
    PredatesReady,    // recorded before a backend became Ready; may still hold
    OutOfDate,        // "no backend is ready", recorded before a backend became Ready
    UnseenByWebhook,  // "no backend is ready" while backends were Ready: the webhook
                      // does not see them
  };
  bool recorded = false;
  std::string message;  // without the Event's prefix; a hint when none is recorded
  std::optional<TimePoint> at;
  Staleness staleness = Staleness::Current;
};

WaitingReason waitingReason(const std::vector<EventView>& podEvents, const BackendCount& backends);

// One line for the status table: the message, and a note when it is out of date.
std::string shortText(const WaitingReason& reason, const BackendCount& backends);

// For why: the message, how old it is and the backends seen now.
std::string longText(const WaitingReason& reason, const BackendCount& backends, TimePoint now);

}  // namespace gvirtus::kubectl_gvirtus
