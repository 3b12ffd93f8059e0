#include "kubectl-gvirtus/waiting_reason.h"

#include <catch2/catch.hpp>

namespace {

using namespace gvirtus::kubectl_gvirtus;
using Staleness = WaitingReason::Staleness;
using std::chrono::minutes;

const TimePoint kNow = std::chrono::system_clock::from_time_t(1795341600);

EventView waitingEvent(const std::string& message, TimePoint at) {
  EventView view;
  view.type = "Normal";
  view.reason = "WaitingForBackend";
  view.message = "Waiting for a GVirtuS backend: " + message;
  view.last = at;
  return view;
}

BackendCount twoReadySince(TimePoint at) {
  return {2, 2, "backend-b", at};
}

TEST_CASE("the latest WaitingForBackend Event is the reason, its prefix cut", "[reason]") {
  EventView other;
  other.reason = "BackendAssigned";
  other.last = kNow - minutes(1);
  const auto reason = waitingReason(
      {waitingEvent("A", kNow - minutes(9)), waitingEvent("B", kNow - minutes(5)), other},
      BackendCount{});
  CHECK(reason.recorded);
  CHECK(reason.message == "B");
  CHECK(reason.at == kNow - minutes(5));
  CHECK(reason.staleness == Staleness::Current);
  CHECK(longText(reason, BackendCount{}, kNow) ==
        "B (recorded 5m ago; backends now: 0 ready of 0)");
  CHECK(shortText(reason, BackendCount{}) == "B");
}

TEST_CASE("no reason recorded yet", "[reason]") {
  const auto reason = waitingReason({}, twoReadySince(kNow - minutes(1)));
  CHECK_FALSE(reason.recorded);
  CHECK_THAT(longText(reason, twoReadySince(kNow), kNow),
             Catch::StartsWith("no reason recorded yet") &&
                 Catch::EndsWith("; backends now: 2 ready of 2"));
}

TEST_CASE("a reason weighed against the backends ready now", "[reason]") {
  const auto none = waitingEvent("no GVirtuS backend is ready", kNow - minutes(9));
  // Recorded before a backend became Ready: out of date.
  auto reason = waitingReason({none}, twoReadySince(kNow - minutes(2)));
  CHECK(reason.staleness == Staleness::OutOfDate);
  CHECK(shortText(reason, twoReadySince(kNow - minutes(2))) ==
        "no GVirtuS backend is ready (out of date: 2 ready now)");
  // Recorded while they were Ready: the webhook does not see them.
  reason = waitingReason({none}, twoReadySince(kNow - minutes(20)));
  CHECK(reason.staleness == Staleness::UnseenByWebhook);
  CHECK(shortText(reason, twoReadySince(kNow - minutes(20))) ==
        "no GVirtuS backend is ready (2 ready, unseen by the webhook)");
  // Without the time they became Ready, the message alone contradicts them.
  reason = waitingReason({none}, BackendCount{2, 2, "", std::nullopt});
  CHECK(reason.staleness == Staleness::OutOfDate);
  CHECK_THAT(longText(reason, BackendCount{2, 2, "", std::nullopt}, kNow),
             Catch::StartsWith("no GVirtuS backend is ready (recorded 9m ago: out of date"));
  // No backend ready: it holds.
  CHECK(waitingReason({none}, BackendCount{0, 1, "", std::nullopt}).staleness ==
        Staleness::Current);
  // Another reason recorded before a backend became Ready may still hold.
  const auto full =
      waitingEvent("none of 2 backends can take the pod: 2 at maxSessions", kNow - minutes(9));
  reason = waitingReason({full}, twoReadySince(kNow - minutes(2)));
  CHECK(reason.staleness == Staleness::PredatesReady);
  CHECK(shortText(reason, twoReadySince(kNow - minutes(2))) ==
        "none of 2 backends can take the pod: 2 at maxSessions");
}

}  // namespace
