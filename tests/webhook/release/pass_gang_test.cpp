// KAI gangs in a release pass, without an API server: released whole or not at all, and
// never left half released when a write fails part way (webhook/release/pass.cpp says
// how): the first member is written before the others, a failed member is written again,
// and a gang partly released is completed first by the next pass, a new leader's included.
#include <algorithm>
#include <catch2/catch.hpp>
#include <stop_token>

#include "webhook/fixtures.h"
#include "webhook/release/pass.h"
#include "webhook/release_fixtures.h"

using namespace gvirtus::webhook;
using namespace gvirtus::webhook::testing;
using namespace gvirtus::webhook::release_testing;
using gvirtus::Error;
using gvirtus::JsonPatch;

namespace {

// What a ValidatingAdmissionPolicy answers when it denies a write.
const Error kDenied{"pods \"gang-2\" is forbidden: ValidatingAdmissionPolicy 'hold' denied request",
                    403, "Forbidden"};

// The gang's members still waiting, as the next pass reads them from the API.
std::vector<json> stillGated(const FakeApi& api, const Names& names) {
  std::vector<json> out;
  for (const auto& name : names) {
    if (isWaiting(api.pods.at(name))) {
      out.push_back(api.pods.at(name));
    }
  }
  return out;
}

size_t position(const Names& names, const std::string& name) {
  return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}

Names sorted(Names names) {
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("members of a PodGroup the cache does not show yet wait for it, never go alone",
          "[waiting][gang]") {
  BackendChooser chooser;
  const auto pods = gangAndLoner(3);
  FakeApi api(pods);
  const GangLookup unseen = [](const json& pod) -> std::optional<Gang> {
    if (!pod["metadata"]["annotations"].contains(std::string(kPodGroupAnnotation))) {
      return std::nullopt;
    }
    return Gang{.name = "team-a/trainers", .unseen = true};
  };
  // Room for all: only the loner goes.
  auto outcomes = releaseWaitingPods(snapshotsOf(pods), {backend("10.0.0.1", 0, 16)}, chooser, {},
                                     api.writer(), {}, unseen);
  CHECK(released(outcomes) == Names{"loner"});
  const auto reasons = waitingReasons(outcomes);
  REQUIRE(reasons.size() == 3);
  CHECK(reasons.at("gang-1") == "its PodGroup team-a/trainers is not seen yet");
}

TEST_CASE("a gang with fewer free sessions than members is not released at all",
          "[waiting][gang]") {
  BackendChooser chooser;
  const auto pods = gangAndLoner(3);
  FakeApi api(pods);
  // Three sessions: the loner (oldest) takes one, the gang of three needs three.
  auto outcomes = releaseWaitingPods(snapshotsOf(pods), {backend("10.0.0.1", 0, 3)}, chooser, {},
                                     api.writer(), {}, gangOfTrainers(3));
  CHECK(released(outcomes) == Names{"loner"});
  const auto reasons = waitingReasons(outcomes);
  REQUIRE(reasons.size() == 3);
  CHECK(reasons.at("gang-1") ==
        "gang team-a/trainers is released whole and only 2 of its 3 waiting pods can get a "
        "backend (none of 1 backend can take the pod: 1 at maxSessions)");
  CHECK(reasons.at("gang-3") == reasons.at("gang-1"));
  // What was chosen for the first two members was given back.
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 1);
  CHECK(api.written == Names{"loner"});
}

TEST_CASE("a gang is released whole, in one pass, when the last session appears",
          "[waiting][gang]") {
  BackendChooser chooser;
  const auto pods = gangAndLoner(3);
  FakeApi api(pods);
  auto outcomes = releaseWaitingPods(snapshotsOf(pods), {backend("10.0.0.1", 0, 2)}, chooser, {},
                                     api.writer(), {}, gangOfTrainers(3));
  CHECK(released(outcomes) == Names{"loner"});
  std::vector<json> rest = {api.pods.at("gang-1"), api.pods.at("gang-2"), api.pods.at("gang-3")};
  outcomes =
      releaseWaitingPods(snapshotsOf(rest), {backend("10.0.0.1", 0, 2), backend("10.0.0.2", 0, 2)},
                         chooser, {}, api.writer(), {}, gangOfTrainers(3));
  CHECK(released(outcomes) == Names{"gang-1", "gang-2", "gang-3"});
  CHECK(api.written.size() == 4);
}

TEST_CASE("a gang waits for its missing members, counting those released before",
          "[waiting][gang]") {
  BackendChooser chooser;
  const auto pods = gangAndLoner(2);
  FakeApi api(pods);
  auto outcomes = releaseWaitingPods(snapshotsOf(pods), {backend("10.0.0.1", 0, 16)}, chooser, {},
                                     api.writer(), {}, gangOfTrainers(3));
  CHECK(released(outcomes) == Names{"loner"});
  CHECK(waitingReasons(outcomes).at("gang-2") == "gang team-a/trainers has 2 of its 3 pods");
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 1);
  // One member was released earlier (a late pod joining a running gang): the two go.
  outcomes = releaseWaitingPods(snapshotsOf({api.pods.at("gang-1"), api.pods.at("gang-2")}),
                                {backend("10.0.0.1", 0, 16)}, chooser, {}, api.writer(), {},
                                gangOfTrainers(3, 1));
  CHECK(released(outcomes) == Names{"gang-1", "gang-2"});
}

TEST_CASE("a gang whose second write is refused is completed first by the next pass",
          "[waiting][gang]") {
  BackendChooser chooser;
  const auto pods = gangAndLoner(2);
  FakeApi api(pods);
  api.refusals["gang-2"] = {2, kDenied};  // the write, and the one made again at once
  auto outcomes = releaseWaitingPods(snapshotsOf(pods), {backend("10.0.0.1", 0, 3)}, chooser, {},
                                     api.writer(), {}, gangOfTrainers(2));
  CHECK(released(outcomes) == Names{"loner", "gang-1"});
  CHECK(api.tried == Names{"loner", "gang-1", "gang-2", "gang-2"});
  REQUIRE(outcomes.back().kind == PodOutcome::Kind::Failed);
  CHECK(outcomes.back().error->httpStatus == 403);
  // gang-2's session is given back when the pass ends.
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 2);

  // The refusal ends. A new leader (a chooser of its own; the two released pods count in
  // the backend's load) sees gang-2 gated beside an older pod that wants the last session.
  json older = waitingPod("older", "2026-11-22T09:00:00Z");
  api.pods["older"] = older;
  BackendChooser leader;
  std::vector<json> next = {older, api.pods.at("gang-2")};
  outcomes = releaseWaitingPods(snapshotsOf(next), {backend("10.0.0.1", 2, 3)}, leader, {},
                                api.writer(), {}, gangOfTrainers(2, 1));
  CHECK(released(outcomes) == Names{"gang-2"});
  CHECK(waitingReasons(outcomes).at("older") ==
        "none of 1 backend can take the pod: 1 at maxSessions");
  CHECK(stillGated(api, {"gang-1", "gang-2"}).empty());
}

TEST_CASE("a member whose write fails once is written again in the same pass", "[waiting][gang]") {
  BackendChooser chooser;
  const auto pods = gangAndLoner(3);
  FakeApi api(pods);
  api.refusals["gang-2"] = {1, Error{"etcdserver: request timed out", 500, ""}};
  auto outcomes = releaseWaitingPods(snapshotsOf(pods), {backend("10.0.0.1", 0, 16)}, chooser, {},
                                     api.writer(), {}, gangOfTrainers(3), 8);
  CHECK(released(outcomes) == Names{"loner", "gang-1", "gang-2", "gang-3"});
  // The first member before the others (each group written together), gang-2 once more
  // after them.
  REQUIRE(api.tried.size() == 5);
  CHECK(position(api.tried, "gang-1") < 2);
  CHECK(position(api.tried, "gang-2") >= 2);
  CHECK(position(api.tried, "gang-3") >= 2);
  CHECK(api.tried.back() == "gang-2");
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 4);
}

TEST_CASE("a refused first member leaves the whole gang gated", "[waiting][gang]") {
  BackendChooser chooser;
  const auto pods = gangAndLoner(2);
  FakeApi api(pods);
  api.refusals["gang-1"] = {1, kDenied};
  auto outcomes = releaseWaitingPods(snapshotsOf(pods), {backend("10.0.0.1", 0, 16)}, chooser, {},
                                     api.writer(), {}, gangOfTrainers(2), 8);
  CHECK(released(outcomes) == Names{"loner"});
  CHECK((sorted(api.tried) == Names{"gang-1", "loner"}));
  REQUIRE(outcomes[2].kind == PodOutcome::Kind::Failed);
  CHECK(outcomes[2].error->httpStatus == 403);
  CHECK_THAT(outcomes[2].error->message,
             Catch::StartsWith("not written, so that the gang stays whole: its first member "
                               "team-a/gang-1 was not released"));
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 1);
  CHECK(stillGated(api, {"gang-1", "gang-2"}).size() == 2);
  // The next pass releases it whole.
  outcomes = releaseWaitingPods(snapshotsOf(stillGated(api, {"gang-1", "gang-2"})),
                                {backend("10.0.0.1", 0, 16)}, chooser, {}, api.writer(), {},
                                gangOfTrainers(2));
  CHECK(released(outcomes) == Names{"gang-1", "gang-2"});
}

TEST_CASE("a gang being completed takes each session as it appears", "[waiting][gang]") {
  BackendChooser chooser;
  const auto pods = gangAndLoner(3);
  FakeApi api(pods);
  // gang-1 was released by an earlier pass; one session is left for gang-2 and gang-3.
  const std::vector<json> rest = {pods[2], pods[3]};
  auto outcomes = releaseWaitingPods(snapshotsOf(rest), {backend("10.0.0.1", 2, 3)}, chooser, {},
                                     api.writer(), {}, gangOfTrainers(3, 1));
  CHECK(released(outcomes) == Names{"gang-2"});
  REQUIRE(outcomes.size() == 2);
  CHECK(outcomes[1].forCapacity);
  CHECK(outcomes[1].reason ==
        "gang team-a/trainers is being completed (1 of its pods released before): none of 1 "
        "backend can take the pod: 1 at maxSessions");
  outcomes =
      releaseWaitingPods(snapshotsOf(stillGated(api, {"gang-3"})), {backend("10.0.0.1", 2, 4)},
                         chooser, {}, api.writer(), {}, gangOfTrainers(3, 2));
  CHECK(released(outcomes) == Names{"gang-3"});
}

TEST_CASE("a pass asked to stop during a gang's first write still writes the rest",
          "[waiting][gang]") {
  BackendChooser chooser;
  const auto pods = gangAndLoner(2);
  FakeApi api(pods);
  std::stop_source stop;
  auto writer = api.writer();
  auto outcomes = releaseWaitingPods(
      snapshotsOf({pods[1], pods[2]}), {backend("10.0.0.1", 0, 16)}, chooser, {},
      [&](const json& pod, const JsonPatch& patch) {
        stop.request_stop();  // leadership lost during the first write
        return writer(pod, patch);
      },
      stop.get_token(), gangOfTrainers(2));
  CHECK(released(outcomes) == Names{"gang-1", "gang-2"});
}

TEST_CASE("a gang that does not fit gives its backend back to the pods after it",
          "[waiting][gang]") {
  // One session. gang-1 takes it, gang-2 finds none, so the gang gives it back. A pass
  // remembers what found no room (the same requirements are not asked again), but a
  // session given back ends that: the later pod, asking the same, gets it.
  std::vector<json> pods = {waitingPod("gang-1", "2026-11-22T10:00:01Z",
                                       {{std::string(kPodGroupAnnotation), "trainers"}}),
                            waitingPod("gang-2", "2026-11-22T10:00:02Z",
                                       {{std::string(kPodGroupAnnotation), "trainers"}}),
                            waitingPod("late", "2026-11-22T10:00:03Z")};
  BackendChooser chooser;
  FakeApi api(pods);
  auto outcomes = releaseWaitingPods(snapshotsOf(pods), {backend("10.0.0.1", 0, 1)}, chooser, {},
                                     api.writer(), {}, gangOfTrainers(2));
  CHECK(released(outcomes) == Names{"late"});
  CHECK_THAT(waitingReasons(outcomes).at("gang-1"),
             Catch::StartsWith("gang team-a/trainers is released whole and only 1 of its 2"));
}
