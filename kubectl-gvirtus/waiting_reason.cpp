#include "kubectl-gvirtus/waiting_reason.h"

namespace gvirtus::kubectl_gvirtus {
namespace {

// The waiting-pod controller's Event reason and message prefix
// (webhook/release/controller.h), and the chooser's reason when it sees no backend
// (webhook/placement/chooser.cpp).
constexpr const char* kWaitingReason = "WaitingForBackend";
constexpr const char* kWaitingPrefix = "Waiting for a GVirtuS backend: ";
constexpr const char* kNoneReady = "no GVirtuS backend is ready";

std::string counted(const BackendCount& backends) {
  return "backends now: " + std::to_string(backends.ready) + " ready of " +
         std::to_string(backends.total);
}

}  // namespace

WaitingReason waitingReason(const std::vector<EventView>& podEvents, const BackendCount& backends) {
  using Staleness = WaitingReason::Staleness;
  WaitingReason out;
  const EventView* latest = latestOf(podEvents, {kWaitingReason});
  if (latest == nullptr) {
    out.message =
        "no reason recorded yet (the webhook's controller writes an Event WaitingForBackend "
        "at its next pass; is a gvirtus-webhook replica running?)";
    return out;
  }
  out.recorded = true;
  out.at = latest->last;
  out.message = latest->message;
  if (out.message.starts_with(kWaitingPrefix)) {
    out.message = out.message.substr(std::string_view(kWaitingPrefix).size());
  }
  const bool noneReady = out.message == kNoneReady && backends.ready > 0;
  if (!out.at || !backends.lastReadyAt) {
    // Without both times, only the message can contradict what is seen now.
    out.staleness = noneReady ? Staleness::OutOfDate : Staleness::Current;
  } else if (*out.at < *backends.lastReadyAt) {
    out.staleness = noneReady ? Staleness::OutOfDate : Staleness::PredatesReady;
  } else if (noneReady) {
    out.staleness = Staleness::UnseenByWebhook;
  }
  return out;
}

std::string shortText(const WaitingReason& reason, const BackendCount& backends) {
  switch (reason.staleness) {
    case WaitingReason::Staleness::OutOfDate:
      return reason.message + " (out of date: " + std::to_string(backends.ready) + " ready now)";
    case WaitingReason::Staleness::UnseenByWebhook:
      return reason.message + " (" + std::to_string(backends.ready) +
             " ready, unseen by the webhook)";
    default:
      return reason.message;
  }
}

std::string longText(const WaitingReason& reason, const BackendCount& backends, TimePoint now) {
  if (!reason.recorded) {
    return reason.message + "; " + counted(backends);
  }
  std::string recorded =
      reason.at ? "recorded " + formatAge(since(reason.at, now)) + " ago" : "recorded";
  const std::string becameReady = backends.lastReadyAt
                                      ? ", before " + backends.lastReadyName + " became Ready " +
                                            formatAge(since(backends.lastReadyAt, now)) + " ago"
                                      : "";
  switch (reason.staleness) {
    case WaitingReason::Staleness::Current:
      break;
    case WaitingReason::Staleness::PredatesReady:
      recorded += becameReady;
      break;
    case WaitingReason::Staleness::OutOfDate:
      recorded += becameReady +
                  ": out of date, no newer pass recorded (is a gvirtus-webhook replica "
                  "leading, and do its --backend-selector and --backend-namespace match the "
                  "backend pods?)";
      break;
    case WaitingReason::Staleness::UnseenByWebhook:
      recorded +=
          " while backends were Ready: the webhook does not see them (its --backend-selector "
          "and --backend-namespace must match the backend pods)";
      break;
  }
  return reason.message + " (" + recorded + "; " + counted(backends) + ")";
}

}  // namespace gvirtus::kubectl_gvirtus
