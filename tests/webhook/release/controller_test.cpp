// The waiting-pod controller's logic without an API server: which pods wait, in what
// order they are released, how many a backend takes, the guarded release patch. Gangs are
// in release_pass_gang_test.cpp, the controller on the real control plane in
// waiting_pod_integration_test.cpp.
#include "webhook/release/controller.h"

#include <catch2/catch.hpp>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "common/contract/backend_requirements.h"
#include "webhook/base/names.h"
#include "webhook/fixtures.h"
#include "webhook/pods/pod_fields.h"
#include "webhook/release_fixtures.h"

using namespace gvirtus::webhook;
using namespace gvirtus::webhook::testing;
using namespace gvirtus::webhook::release_testing;
using gvirtus::Error;
using gvirtus::JsonPatch;
using gvirtus::Result;

TEST_CASE("waiting pods are the gated ones and the oldest come first", "[waiting]") {
  json plain = gvirtusPod();
  plain["metadata"]["name"] = "released";
  json deleting = waitingPod("deleting", "2026-11-22T09:00:00Z");
  deleting["metadata"]["deletionTimestamp"] = "2026-11-22T10:00:00Z";
  json otherGate = waitingPod("other-gate", "2026-11-22T09:00:00Z");
  otherGate["spec"]["schedulingGates"] = json::array({{{"name", "example.com/quota"}}});
  json both = waitingPod("both-gates", "2026-11-22T10:00:01Z");
  both["spec"]["schedulingGates"] =
      json::array({{{"name", "example.com/quota"}}, {{"name", "gvirtus.io/backend"}}});
  const std::vector<json> pods = {waitingPod("b", "2026-11-22T10:00:01Z"),
                                  plain,
                                  waitingPod("late", "2026-11-22T10:05:00Z"),
                                  deleting,
                                  waitingPod("a", "2026-11-22T10:00:01Z", json::object(), "team-b"),
                                  otherGate,
                                  waitingPod("first", "2026-11-22T09:59:59.5Z"),
                                  both};
  CHECK_FALSE(isWaiting(plain));
  CHECK_FALSE(isWaiting(deleting));
  CHECK(isWaiting(both));
  Names order;
  for (const auto& pod : waitingPods(snapshotsOf(pods))) {
    order.push_back(nameOf(*pod));
  }
  // Same second: by namespace/name (team-a/b, team-a/both-gates, team-b/a).
  CHECK(order == Names{"first", "b", "both-gates", "a", "late"});
}

TEST_CASE("the release patch writes the backend and removes only our gate behind test operations",
          "[waiting]") {
  json pod = waitingPod("p", "2026-11-22T10:00:00Z", {{"team", "ml"}});
  pod["spec"]["schedulingGates"] =
      json::array({{{"name", "example.com/quota"}}, {{"name", "gvirtus.io/backend"}}});
  const Assignment assignment{
      "10.0.0.7:9999", "gvirtus-system/backend-a", "{\"x\":1}", "", std::nullopt, "webhook-a"};
  const JsonPatch patch = releasePatch(pod, assignment);
  const json ops = patch.toJson();
  CHECK(ops[0] == json({{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", "100"}}));
  CHECK(ops[1] == json({{"op", "test"},
                        {"path", "/spec/schedulingGates/1/name"},
                        {"value", "gvirtus.io/backend"}}));

  const json out = applied(pod, ops);
  CHECK(out["spec"]["schedulingGates"] == json::parse(R"([{"name":"example.com/quota"}])"));
  CHECK(out["metadata"]["annotations"] ==
        json({{"team", "ml"},
              {"gvirtus.io/backend", "10.0.0.7:9999"},
              {"gvirtus.io/backend-pod", "gvirtus-system/backend-a"},
              {"gvirtus.io/properties", "{\"x\":1}"},
              {"gvirtus.io/assigned-by", "webhook-a"}}));

  // A pod changed since it was read (another replica released it; the gates moved) gets
  // nothing: the whole patch is refused.
  json changed = pod;
  changed["metadata"]["resourceVersion"] = "101";
  CHECK_FALSE(gvirtus::applyJsonPatch(changed, ops).has_value());
  json moved = pod;
  moved["spec"]["schedulingGates"] =
      json::array({{{"name", "gvirtus.io/backend"}}, {{"name", "example.com/quota"}}});
  CHECK_FALSE(gvirtus::applyJsonPatch(moved, ops).has_value());
  CHECK_FALSE(gvirtus::applyJsonPatch(out, ops).has_value());  // released already

  CHECK(isReleaseConflict(Error{"Operation cannot be fulfilled", 409, "Conflict"}));
  CHECK(isReleaseConflict(Error{"testing value /metadata/resourceVersion failed", 422, "Invalid"}));
  CHECK_FALSE(isReleaseConflict(Error{"spec: Forbidden", 422, "Invalid"}));
  CHECK_FALSE(isReleaseConflict(Error{"boom", 500, ""}));
}

TEST_CASE("a backend with room for three releases the three oldest and a second backend the rest",
          "[waiting]") {
  BackendChooser chooser;
  const auto pods = fivePods();
  FakeApi api(pods);
  const Backend first = backend("10.0.0.1", 0, 3, "backend-a");

  auto outcomes = releaseWaitingPods(snapshotsOf(pods), {first}, chooser, {}, api.writer());
  CHECK(released(outcomes) == Names{"pod-1", "pod-2", "pod-3"});
  const auto reasons = waitingReasons(outcomes);
  REQUIRE(reasons.size() == 2);
  CHECK(reasons.at("pod-4") == "none of 1 backend can take the pod: 1 at maxSessions");
  for (const auto& name : {"pod-1", "pod-2", "pod-3"}) {
    const json& pod = api.pods.at(name);
    CHECK(pod["metadata"]["annotations"]["gvirtus.io/backend"] == "10.0.0.1:9999");
    CHECK(pod["metadata"]["annotations"]["gvirtus.io/backend-pod"] == "gvirtus-system/backend-a");
    CHECK_FALSE(pod["metadata"]["annotations"].contains("gvirtus.io/backend-status"));
    CHECK(pod["spec"]["schedulingGates"].empty());
    const json properties =
        json::parse(pod["metadata"]["annotations"]["gvirtus.io/properties"].get<std::string>());
    CHECK(properties["communicator"][0]["endpoint"]["server_address"] == "10.0.0.1");
  }

  // The next pass, with the released pods gone from the waiting list: the first backend is
  // still full (its own assignments count), the second takes the rest.
  std::vector<json> rest = {api.pods.at("pod-4"), api.pods.at("pod-5")};
  outcomes = releaseWaitingPods(snapshotsOf(rest), {first}, chooser, {}, api.writer());
  CHECK(released(outcomes).empty());
  const Backend second = backend("10.0.0.2", 0, 3, "backend-b");
  outcomes = releaseWaitingPods(snapshotsOf(rest), {first, second}, chooser, {}, api.writer());
  CHECK(released(outcomes) == Names{"pod-4", "pod-5"});
  CHECK(api.pods.at("pod-5")["metadata"]["annotations"]["gvirtus.io/backend"] == "10.0.0.2:9999");
  CHECK(api.written.size() == 5);
}

TEST_CASE("least-connections spreads a pass over backends with room", "[waiting]") {
  BackendChooser chooser;
  const auto pods = fivePods();
  FakeApi api(pods);
  auto outcomes =
      releaseWaitingPods(snapshotsOf(pods), {backend("10.0.0.1", 1, 3), backend("10.0.0.2", 0, 3)},
                         chooser, {}, api.writer());
  CHECK(released(outcomes).size() == 5);
  std::map<std::string, int> landed;
  for (const auto& [name, pod] : api.pods) {
    ++landed[pod["metadata"]["annotations"]["gvirtus.io/backend"]];
  }
  CHECK(landed["10.0.0.1:9999"] == 2);  // 1 connection + 2 = 3
  CHECK(landed["10.0.0.2:9999"] == 3);
}

TEST_CASE("a failed release gives the backend back to the next pod", "[waiting]") {
  BackendChooser chooser;
  const auto pods = fivePods();
  FakeApi api(pods);
  api.refuse = {"pod-1"};
  // Another replica released pod-2 meanwhile: our copy is stale, its test fails.
  api.pods["pod-2"]["metadata"]["resourceVersion"] = "105";
  auto outcomes =
      releaseWaitingPods(snapshotsOf(pods), {backend("10.0.0.1", 0, 2)}, chooser, {}, api.writer());
  CHECK(released(outcomes) == Names{"pod-3", "pod-4"});
  REQUIRE(outcomes[0].kind == PodOutcome::Kind::Failed);
  CHECK(outcomes[0].error->httpStatus == 500);
  REQUIRE(outcomes[1].kind == PodOutcome::Kind::Failed);
  CHECK(isReleaseConflict(*outcomes[1].error));
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 2);
  CHECK(waitingReasons(outcomes).contains("pod-5"));
}

TEST_CASE("writes go several at a time, and a failed one's backend goes to a later pod",
          "[waiting]") {
  BackendChooser chooser;
  const auto pods = fivePods();
  FakeApi api(pods);
  api.refuse = {"pod-1"};
  std::mutex mutex;
  int inFlight = 0;
  int mostInFlight = 0;
  auto writer = api.writer();
  auto outcomes = releaseWaitingPods(
      snapshotsOf(pods), {backend("10.0.0.1", 0, 2)}, chooser, {},
      [&](const json& pod, const JsonPatch& patch) {
        {
          std::lock_guard lock(mutex);
          mostInFlight = std::max(mostInFlight, ++inFlight);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the API server's time
        std::lock_guard lock(mutex);
        --inFlight;
        return writer(pod, patch);
      },
      {}, {}, 2);
  // pod-1 and pod-2 were written together; pod-1's session went to pod-3, chosen after.
  CHECK(mostInFlight == 2);
  CHECK(released(outcomes) == Names{"pod-2", "pod-3"});
  REQUIRE(outcomes.size() == 5);
  CHECK(nameOf(*outcomes[0].pod) == "pod-1");
  CHECK(outcomes[0].kind == PodOutcome::Kind::Failed);
  CHECK(waitingReasons(outcomes).size() == 2);
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 2);
}

TEST_CASE("a slow write holds up only its own writer, not the pods chosen after it", "[waiting]") {
  BackendChooser chooser;
  const auto pods = fivePods();
  FakeApi api(pods);
  auto writer = api.writer();
  std::mutex mutex;
  std::condition_variable othersWritten;
  int others = 0;
  bool firstWaitedForThem = false;
  auto outcomes = releaseWaitingPods(
      snapshotsOf(pods), {backend("10.0.0.1", 0, 5)}, chooser, {},
      [&](const json& pod, const JsonPatch& patch) {
        std::unique_lock lock(mutex);
        if (nameOf(pod) == "pod-1") {
          // The API server takes pod-1's write until the four others are written: only
          // another writer can write them meanwhile (a bound, not a pace: it fails the test).
          firstWaitedForThem =
              othersWritten.wait_for(lock, std::chrono::seconds(10), [&] { return others == 4; });
        } else {
          ++others;
          othersWritten.notify_all();
        }
        return writer(pod, patch);
      },
      {}, {}, 2);
  CHECK(firstWaitedForThem);
  CHECK(released(outcomes).size() == 5);
}

TEST_CASE("a pod no backend can take waits with the reason while younger pods go ahead",
          "[waiting]") {
  BackendChooser chooser;
  std::vector<json> pods = {
      waitingPod("huge", "2026-11-22T10:00:00Z", {{"gvirtus.io/gpu-memory", "1Ti"}}),
      waitingPod("many-gpus", "2026-11-22T10:00:01Z", {{"gvirtus.io/gpus", "4"}}),
      waitingPod("bad", "2026-11-22T10:00:02Z", {{"gvirtus.io/gpus", "four"}}),
      waitingPod("small", "2026-11-22T10:00:03Z", {{"gvirtus.io/gpu-memory", "8Gi"}})};
  FakeApi api(pods);
  auto outcomes = releaseWaitingPods(waitingPods(snapshotsOf(pods)), {backend("10.0.0.1", 0, 16)},
                                     chooser, {}, api.writer());
  CHECK(released(outcomes) == Names{"small"});
  const auto reasons = waitingReasons(outcomes);
  CHECK(reasons.at("huge") ==
        "none of 1 backend can take the pod: 1 without a GPU with 1048576 MiB free");
  CHECK(reasons.at("many-gpus") == "none of 1 backend can take the pod: 1 with fewer than 4 GPUs");
  CHECK_THAT(reasons.at("bad"), Catch::StartsWith("annotation gvirtus.io/gpus=\"four\""));

  outcomes = releaseWaitingPods({}, {}, chooser, {}, api.writer());
  CHECK(outcomes.empty());
  outcomes = releaseWaitingPods(snapshotsOf({pods[0]}), {}, chooser, {}, api.writer());
  CHECK(waitingReasons(outcomes).at("huge") == "no GVirtuS backend is ready");
}

TEST_CASE("KAI gpu-fraction and gpu-memory count against the backend's GPU", "[waiting]") {
  BackendChooser chooser;
  // One GPU of 81920 MiB, 1024 used: 80896 free.
  const Backend gpu = backend("10.0.0.1", 0, 16);
  std::vector<json> pods = {waitingPod("half-1", "2026-11-22T10:00:00Z", {{"gpu-fraction", "0.5"}}),
                            waitingPod("half-2", "2026-11-22T10:00:01Z", {{"gpu-fraction", "0.5"}}),
                            waitingPod("mib", "2026-11-22T10:00:02Z", {{"gpu-memory", "30000"}}),
                            waitingPod("mib-2", "2026-11-22T10:00:03Z", {{"gpu-memory", "30000"}})};
  FakeApi api(pods);
  auto outcomes = releaseWaitingPods(snapshotsOf(pods), {gpu}, chooser, {}, api.writer());
  // 80896 - 40960 = 39936 left: the second half does not fit, 30000 MiB does, once.
  CHECK(released(outcomes) == Names{"half-1", "mib"});
  const auto reasons = waitingReasons(outcomes);
  CHECK(reasons.at("half-2") ==
        "none of 1 backend can take the pod: 1 without a GPU with 0.5 of its memory free");
  CHECK(reasons.at("mib-2") ==
        "none of 1 backend can take the pod: 1 without a GPU with 30000 MiB free");
  REQUIRE(outcomes[0].choice.has_value());
  CHECK(outcomes[0].choice->gpuIndex == 0);
  CHECK(outcomes[0].choice->memoryMiB == 40960);
}

TEST_CASE("a pass stops between pods when asked to", "[waiting]") {
  BackendChooser chooser;
  const auto pods = fivePods();
  FakeApi api(pods);
  std::stop_source stop;
  auto writer = api.writer();
  auto outcomes = releaseWaitingPods(
      snapshotsOf(pods), {backend("10.0.0.1", 0, 16)}, chooser, {},
      [&](const json& pod, const JsonPatch& patch) {
        stop.request_stop();  // leadership lost during the first write
        return writer(pod, patch);
      },
      stop.get_token());
  CHECK(outcomes.size() == 1);
  CHECK(api.written == Names{"pod-1"});
}

TEST_CASE("a gated pod the webhook never wired is refused, not released", "[waiting]") {
  // Created with the gate (and even the webhook's waiting annotation) but without the label
  // gvirtus.io/enabled, so the webhook never saw it; labelled afterwards.
  json unwired = gvirtusPod();
  unwired["metadata"]["name"] = "sneaky";
  unwired["metadata"]["namespace"] = "team-a";
  unwired["metadata"]["uid"] = "uid-sneaky";
  unwired["metadata"]["resourceVersion"] = "100";
  unwired["metadata"]["creationTimestamp"] = "2026-11-22T10:00:00Z";
  unwired["metadata"]["annotations"] = {{"gvirtus.io/backend-status", "waiting"}};
  unwired["spec"]["schedulingGates"] = json::array({{{"name", "gvirtus.io/backend"}}});
  REQUIRE(isWaiting(unwired));
  const json admitted = waitingPod("admitted", "2026-11-22T10:00:01Z");
  const auto pods = copiesOf(waitingPods(snapshotsOf({admitted, unwired})));
  REQUIRE(pods.size() == 2);

  BackendChooser chooser;
  FakeApi api(pods);
  const auto outcomes = releaseWaitingPods(snapshotsOf(pods), {backend("10.0.0.1", 0, 16)}, chooser,
                                           {}, api.writer());
  // The admitted pod is released; the other one is given nothing and keeps its gate.
  CHECK(released(outcomes) == Names{"admitted"});
  CHECK(api.written == Names{"admitted"});
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 1);
  const PodOutcome* refused = nullptr;
  for (const auto& outcome : outcomes) {
    if (nameOf(*outcome.pod) == "sneaky") {
      refused = &outcome;
    }
  }
  REQUIRE(refused != nullptr);
  CHECK(refused->kind == PodOutcome::Kind::Refused);
  CHECK_FALSE(refused->choice.has_value());
  CHECK_THAT(refused->reason, Catch::Contains("not wired by the GVirtuS webhook"));
  CHECK(api.pods.at("sneaky") == unwired);
  CHECK(std::string(kNotWiredReason) == "NotWiredByWebhook");
}

TEST_CASE(
    "the waiting pods' cache keeps what a release reads and writes, and its patch is the same",
    "[waiting]") {
  json pod = waitingPod("kept", "2026-11-22T10:00:00Z", {{"team.example/owner", "ana"}});
  pod["metadata"]["managedFields"] =
      json::array({{{"manager", "kubectl-create"},
                    {"operation", "Update"},
                    {"fieldsType", "FieldsV1"},
                    {"fieldsV1", {{"f:spec", {{"f:containers", json::object()}}}}}}});
  pod["spec"]["affinity"] = {
      {"nodeAffinity",
       {{"preferredDuringSchedulingIgnoredDuringExecution",
         json::array({{{"weight", 1},
                       {"preference",
                        {{"matchExpressions", json::array({{{"key", "disk"},
                                                            {"operator", "In"},
                                                            {"values", {"ssd"}}}})}}}}})}}}};
  pod["status"] = {
      {"phase", "Pending"},
      {"conditions",
       json::array(
           {{{"type", "PodScheduled"}, {"status", "False"}, {"reason", "SchedulingGated"}}})}};

  pod["spec"]["nodeSelector"] = {{"topology.kubernetes.io/zone", "zone-b"}};
  pod["spec"]["volumes"].push_back({{"name", "kube-api-access"}, {"projected", json::object()}});

  const json kept = waitingFields(pod);
  CHECK_FALSE(kept["metadata"].contains("managedFields"));
  CHECK(kept["status"] == json{{"phase", "Pending"}});
  CHECK(kept["metadata"]["annotations"] == pod["metadata"]["annotations"]);
  CHECK_FALSE(kept["spec"].contains("containers"));
  CHECK(kept["spec"]["volumes"].size() == 1);
  CHECK(isWaiting(kept));
  CHECK(gatedByWebhook(kept));
  const auto asked = gvirtus::requirementsFromPod(kept);
  REQUIRE(asked.has_value());
  CHECK(asked->zone == "zone-b");
  CHECK(*asked == *gvirtus::requirementsFromPod(pod));

  // Applied to the pod as the API server holds it, the patch made from what the cache
  // keeps does what the patch made from the whole pod does: nothing of the pod is lost.
  const Assignment assignment{.endpoint = "10.0.0.1:9999",
                              .backendPod = "gvirtus-system/be-1",
                              .properties = "{}",
                              .preferredZone = "zone-a",
                              .gpuIndex = 0,
                              .assignedBy = "webhook-1"};
  auto fromKept = gvirtus::applyJsonPatch(pod, releasePatch(kept, assignment).toJson());
  auto fromWhole = gvirtus::applyJsonPatch(pod, releasePatch(pod, assignment).toJson());
  // What the patch may touch: waitingFields() keeps each of these whole. A release that
  // wrote anything else would write it from the kept part only, and erase the rest.
  for (const auto& op : releasePatch(kept, assignment).toJson()) {
    const std::string path = op["path"];
    const bool allowed = path.starts_with("/metadata/") || path.starts_with("/spec/affinity") ||
                         path.starts_with("/spec/schedulingGates");
    CHECK(allowed);
  }
  REQUIRE(fromKept.has_value());
  REQUIRE(fromWhole.has_value());
  CHECK(*fromKept == *fromWhole);
  CHECK((*fromKept)["metadata"]["annotations"]["team.example/owner"] == "ana");
  CHECK((*fromKept)["metadata"]["managedFields"] == pod["metadata"]["managedFields"]);
}
