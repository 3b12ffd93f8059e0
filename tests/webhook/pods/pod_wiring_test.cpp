#include "webhook/pods/pod_wiring.h"

#include <catch2/catch.hpp>

#include "webhook/fixtures.h"

using namespace gvirtus::webhook;
using namespace gvirtus::webhook::testing;

namespace {

json wired(json pod, const WiringOptions& options = {}) {
  auto ok = wirePod(pod, options);
  INFO((ok ? "" : ok.error().message));
  REQUIRE(ok.has_value());
  return pod;
}

json waitingCopy(json pod) {
  markWaiting(pod);
  return pod;
}

json assignedCopy(json pod, const Assignment& assignment) {
  assignBackend(pod, assignment);
  return pod;
}

const json kVolume = json::parse(R"({"name":"gvirtus-config","downwardAPI":{"defaultMode":420,
  "items":[{"path":"properties.json","fieldRef":{"apiVersion":"v1",
  "fieldPath":"metadata.annotations['gvirtus.io/properties']"}}]}})");

}  // namespace

TEST_CASE("one container: volume, mount, env, node selector, GPU limit", "[pod-wiring]") {
  const json pod = gvirtusPod();
  const json out = wired(pod);
  CHECK(out["spec"]["volumes"] == json::array({kVolume}));
  const json& app = out["spec"]["containers"][0];
  CHECK(mountsConfig(app));
  CHECK(envEntry(app, "GVIRTUS_CONFIG")["value"] == "/etc/gvirtus/properties.json");
  CHECK(app["resources"]["limits"]["nvidia.com/gpu"] == "1");
  CHECK(out["spec"]["nodeSelector"]["gvirtus.io/frontend.allowed"] == "true");
  // The command is never touched.
  CHECK(app["command"] == pod["spec"]["containers"][0]["command"]);
  CHECK(app["image"] == "example/app");
  CHECK(out["spec"]["schedulerName"] == "default-scheduler");
}

TEST_CASE("several containers: all wired, the GPU limit on the first only", "[pod-wiring]") {
  const json out = wired(gvirtusPod({"app", "worker", "logger"}));
  for (int i = 0; i < 3; ++i) {
    INFO(i);
    CHECK(mountsConfig(out["spec"]["containers"][i]));
    CHECK(envEntry(out["spec"]["containers"][i], "GVIRTUS_CONFIG") != nullptr);
  }
  CHECK(out["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1");
  CHECK_FALSE(out["spec"]["containers"][1]["resources"].contains("limits"));
  CHECK(out["spec"]["volumes"].size() == 1);
}

TEST_CASE("a named subset of containers", "[pod-wiring]") {
  json pod = gvirtusPod({"app", "worker", "logger"});
  pod["metadata"]["annotations"] = {{"gvirtus.io/containers", "logger, worker"}};
  const json out = wired(pod);
  CHECK_FALSE(mountsConfig(out["spec"]["containers"][0]));
  CHECK(envEntry(out["spec"]["containers"][0], "GVIRTUS_CONFIG") == nullptr);
  CHECK(mountsConfig(out["spec"]["containers"][1]));
  CHECK(mountsConfig(out["spec"]["containers"][2]));
  // The first wired container in pod order gets the limit.
  CHECK(out["spec"]["containers"][1]["resources"]["limits"]["nvidia.com/gpu"] == "1");
  CHECK_FALSE(out["spec"]["containers"][2]["resources"].contains("limits"));

  auto targets = wiredContainers(pod);
  REQUIRE(targets.has_value());
  REQUIRE(targets->size() == 2);
  CHECK((*targets)[0].name == "worker");
}

TEST_CASE("an init container can be named", "[pod-wiring]") {
  json pod = gvirtusPod({"app"});
  pod["spec"]["initContainers"] = json::array({{{"name", "warmup"}, {"image", "x"}}});
  pod["metadata"]["annotations"] = {{"gvirtus.io/containers", "warmup"}};
  const json out = wired(pod);
  CHECK(mountsConfig(out["spec"]["initContainers"][0]));
  CHECK_FALSE(mountsConfig(out["spec"]["containers"][0]));
}

TEST_CASE("an unknown container name is an error naming it", "[pod-wiring]") {
  json pod = gvirtusPod({"app", "worker"});
  pod["metadata"]["annotations"] = {{"gvirtus.io/containers", "app,trainer"}};
  auto wiredOk = wirePod(pod, {});
  REQUIRE_FALSE(wiredOk.has_value());
  CHECK(wiredOk.error().message ==
        "annotation gvirtus.io/containers names container \"trainer\", which the pod does not "
        "have (it has: app, worker)");
}

TEST_CASE("a container already setting GVIRTUS_CONFIG keeps its value", "[pod-wiring]") {
  json pod = gvirtusPod({"app"});
  pod["spec"]["containers"][0]["env"] =
      json::array({{{"name", "GVIRTUS_CONFIG"}, {"value", "/opt/mine.json"}}});
  const json out = wired(pod);
  CHECK(out["spec"]["containers"][0]["env"] ==
        json::array({{{"name", "GVIRTUS_CONFIG"}, {"value", "/opt/mine.json"}}}));
  CHECK(mountsConfig(out["spec"]["containers"][0]));
}

TEST_CASE("the pod's own node selector and GPU limit are kept", "[pod-wiring]") {
  json pod = gvirtusPod({"app", "worker"});
  pod["spec"]["nodeSelector"] = {{"disk", "ssd"}};
  pod["spec"]["containers"][1]["resources"] = {{"limits", {{"nvidia.com/gpu", "2"}}},
                                               {"requests", {{"nvidia.com/gpu", "2"}}}};
  const json out = wired(pod);
  CHECK(out["spec"]["nodeSelector"] ==
        json({{"disk", "ssd"}, {"gvirtus.io/frontend.allowed", "true"}}));
  CHECK_FALSE(out["spec"]["containers"][0]["resources"].contains("limits"));
  CHECK(out["spec"]["containers"][1]["resources"]["limits"]["nvidia.com/gpu"] == "2");
}

TEST_CASE("add-gpu-limit off adds no limit", "[pod-wiring]") {
  WiringOptions options;
  options.addGpuLimit = false;
  const json out = wired(gvirtusPod(), options);
  CHECK_FALSE(out["spec"]["containers"][0]["resources"].contains("limits"));
}

TEST_CASE("a KAI GPU share (gpu-fraction, gpu-memory) gets no GPU limit where KAI schedules",
          "[pod-wiring]") {
  WiringOptions kai;
  kai.schedulerName = "kai-scheduler";
  for (const char* annotation : {"gpu-fraction", "gpu-memory"}) {
    INFO(annotation);
    json pod = gvirtusPod();
    pod["metadata"]["annotations"][annotation] = "1";
    // The webhook names KAI for the pod.
    const json out = wired(pod, kai);
    CHECK(out["spec"]["schedulerName"] == "kai-scheduler");
    CHECK_FALSE(out["spec"]["containers"][0]["resources"].contains("limits"));
    CHECK(out["spec"]["nodeSelector"]["gvirtus.io/frontend.allowed"] == "true");
    // The pod names KAI itself.
    pod["spec"]["schedulerName"] = "kai-scheduler";
    CHECK_FALSE(wired(pod, kai)["spec"]["containers"][0]["resources"].contains("limits"));
  }
}

TEST_CASE("a KAI GPU share where KAI does not schedule the pod still gets the GPU limit",
          "[pod-wiring]") {
  // Another scheduler ignores gpu-fraction and gpu-memory: without the limit a namespace's
  // nvidia.com/gpu ResourceQuota would not count the pod at all.
  for (const char* annotation : {"gpu-fraction", "gpu-memory"}) {
    INFO(annotation);
    json pod = gvirtusPod();
    pod["metadata"]["annotations"][annotation] = "1";
    // No KAI configured: the pod keeps the default scheduler.
    json out = wired(pod, WiringOptions{});
    CHECK(out["spec"]["schedulerName"] == "default-scheduler");
    CHECK(out["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1");
    // The pod names KAI, but the webhook was not told KAI schedules: not trusted.
    pod["spec"]["schedulerName"] = "kai-scheduler";
    out = wired(pod, WiringOptions{});
    CHECK(out["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1");
    // KAI configured, but the pod names a scheduler of its own.
    WiringOptions kai;
    kai.schedulerName = "kai-scheduler";
    pod["spec"]["schedulerName"] = "my-scheduler";
    out = wired(pod, kai);
    CHECK(out["spec"]["schedulerName"] == "my-scheduler");
    CHECK(out["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1");
  }
}

TEST_CASE("existing volumes, mounts and env are appended to", "[pod-wiring]") {
  json pod = gvirtusPod({"app"});
  pod["spec"]["volumes"] = json::array({{{"name", "data"}, {"emptyDir", json::object()}}});
  pod["spec"]["containers"][0]["volumeMounts"] =
      json::array({{{"name", "data"}, {"mountPath", "/data"}}});
  pod["spec"]["containers"][0]["env"] = json::array({{{"name", "A"}, {"value", "1"}}});
  const json out = wired(pod);
  CHECK(out["spec"]["volumes"].size() == 2);
  CHECK(out["spec"]["volumes"][1] == kVolume);
  CHECK(out["spec"]["containers"][0]["volumeMounts"].size() == 2);
  CHECK(out["spec"]["containers"][0]["env"].size() == 2);
}

TEST_CASE("something else mounted at /etc/gvirtus is an error", "[pod-wiring]") {
  json pod = gvirtusPod({"app"});
  pod["spec"]["containers"][0]["volumeMounts"] =
      json::array({{{"name", "mine"}, {"mountPath", "/etc/gvirtus"}}});
  auto wiredOk = wirePod(pod, {});
  REQUIRE_FALSE(wiredOk.has_value());
  CHECK_THAT(wiredOk.error().message, Catch::Contains("\"app\" already mounts volume \"mine\""));
}

TEST_CASE("a foreign volume named gvirtus-config is replaced", "[pod-wiring]") {
  json pod = gvirtusPod({"app"});
  pod["spec"]["volumes"] =
      json::array({{{"name", "gvirtus-config"}, {"emptyDir", json::object()}}});
  const json out = wired(pod);
  CHECK(out["spec"]["volumes"] == json::array({kVolume}));
}

TEST_CASE("wiring twice changes nothing more", "[pod-wiring]") {
  json pod = gvirtusPod({"app", "worker"});
  pod["metadata"]["annotations"] = {{"gvirtus.io/containers", "worker"}};
  WiringOptions options;
  options.schedulerName = "kai-scheduler";
  options.kaiQueue = "team-a";
  const json once = wired(pod, options);
  CHECK(wired(once, options) == once);
  CHECK(once["spec"]["schedulerName"] == "kai-scheduler");
  CHECK(once["metadata"]["labels"]["kai.scheduler/queue"] == "team-a");
}

TEST_CASE("scheduler name and queue only where the pod has none", "[pod-wiring]") {
  json pod = gvirtusPod();
  pod["spec"]["schedulerName"] = "my-scheduler";
  pod["metadata"]["labels"]["kai.scheduler/queue"] = "mine";
  WiringOptions options;
  options.schedulerName = "kai-scheduler";
  options.kaiQueue = "team-a";
  const json out = wired(pod, options);
  CHECK(out["spec"]["schedulerName"] == "my-scheduler");
  CHECK(out["metadata"]["labels"]["kai.scheduler/queue"] == "mine");
}

TEST_CASE("a GVirtuS pod that asks for fewer than one GPU is refused in one line", "[pod-wiring]") {
  const std::string line =
      "nvidia.com/gpu below 1: a GVirtuS pod holds a remote GPU and counts as at least 1 "
      "against the namespace's quota (ask for 1 or more, or leave nvidia.com/gpu out)";
  for (const json& zero : {json("0"), json(0), json("0.5"), json("500m")}) {
    INFO(zero.dump());
    json pod = gvirtusPod({"app", "worker"});
    pod["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", zero}}}};
    auto refused = wirePod(pod, {});
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().message == line);
    // add-gpu-limit off does not make "0" count less.
    WiringOptions noLimit;
    noLimit.addGpuLimit = false;
    json again = gvirtusPod();
    again["spec"]["containers"][0]["resources"] = {{"requests", {{"nvidia.com/gpu", zero}}}};
    CHECK_FALSE(wirePod(again, noLimit).has_value());
  }
  // The wired containers' asks add up: "0" beside "1" is one GPU.
  json split = gvirtusPod({"app", "worker"});
  split["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", "0"}}}};
  split["spec"]["containers"][1]["resources"] = {{"limits", {{"nvidia.com/gpu", "1"}}}};
  CHECK(wirePod(split, {}).has_value());
  json garbage = gvirtusPod();
  garbage["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", "lots"}}}};
  auto unreadable = wirePod(garbage, {});
  REQUIRE_FALSE(unreadable.has_value());
  CHECK(unreadable.error().message.rfind("container \"app\": nvidia.com/gpu: ", 0) == 0);
}

TEST_CASE("a GPU share its author bound to a node is counted whole: KAI never sees it",
          "[pod-wiring]") {
  WiringOptions kai;
  kai.schedulerName = "kai-scheduler";
  json pod = gvirtusPod();
  pod["metadata"]["annotations"]["gpu-fraction"] = "0.5";
  pod["spec"]["nodeName"] = "fe-a";
  const json out = wired(pod, kai);
  CHECK(out["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1");
}

TEST_CASE("gated by the webhook: wired at admission and marked waiting", "[pod-wiring]") {
  const json admitted = waitingCopy(wired(gvirtusPod()));
  CHECK(gatedByWebhook(admitted));
  // The gate and the annotation a pod's author can write; the volume only at creation.
  json forged = gvirtusPod();
  forged["metadata"]["labels"].erase("gvirtus.io/enabled");
  forged = waitingCopy(forged);
  CHECK_FALSE(gatedByWebhook(forged));
  forged["spec"]["volumes"] =
      json::array({{{"name", "gvirtus-config"}, {"emptyDir", json::object()}}});
  CHECK_FALSE(gatedByWebhook(forged));
  // Wired but never gated by the webhook (it had a backend at admission).
  CHECK_FALSE(gatedByWebhook(wired(gvirtusPod())));
  json other = admitted;
  other["metadata"]["annotations"]["gvirtus.io/backend-status"] = "something";
  CHECK_FALSE(gatedByWebhook(other));
}

TEST_CASE("assignment: backend annotations, preferred zone, end of waiting", "[pod-wiring]") {
  json pod = gvirtusPod();
  const json waiting = waitingCopy(pod);
  CHECK(waiting["metadata"]["annotations"]["gvirtus.io/backend-status"] == "waiting");
  CHECK(waiting["spec"]["schedulingGates"] == json::parse(R"([{"name":"gvirtus.io/backend"}])"));
  CHECK(waitingCopy(waiting) == waiting);

  Assignment assignment{"10.0.0.7:9999", "gvirtus-system/backend-0", "{}", "zone-a", std::nullopt,
                        "webhook-a"};
  const json out = assignedCopy(waiting, assignment);
  const json& annotations = out["metadata"]["annotations"];
  CHECK(annotations["gvirtus.io/backend"] == "10.0.0.7:9999");
  CHECK(annotations["gvirtus.io/backend-pod"] == "gvirtus-system/backend-0");
  CHECK(annotations["gvirtus.io/properties"] == "{}");
  CHECK(annotations["gvirtus.io/assigned-by"] == "webhook-a");
  CHECK_FALSE(annotations.contains("gvirtus.io/backend-status"));
  CHECK(out["spec"]["schedulingGates"].empty());
  CHECK(
      out["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] ==
      json::parse(R"([{"weight":100,"preference":{"matchExpressions":[
          {"key":"topology.kubernetes.io/zone","operator":"In","values":["zone-a"]}]}}])"));
  CHECK(assignedCopy(out, assignment) == out);
}

TEST_CASE("static backends carry no backend-pod annotation, and without an instance no assigned-by",
          "[pod-wiring]") {
  json pod = gvirtusPod();
  pod["metadata"]["annotations"] = {{"gvirtus.io/backend-pod", "stale/value"}};
  pod["metadata"]["annotations"]["gvirtus.io/assigned-by"] = "the-author";  // not trusted
  const json out = assignedCopy(pod, {"192.0.2.1:9999", "", "{}", "", std::nullopt, ""});
  CHECK_FALSE(out["metadata"]["annotations"].contains("gvirtus.io/assigned-by"));
  CHECK_FALSE(out["metadata"]["annotations"].contains("gvirtus.io/backend-pod"));
  CHECK_FALSE(out["spec"].contains("affinity"));
}

TEST_CASE("the GPU a pod's memory counts against is written, or removed", "[pod-wiring]") {
  json pod = gvirtusPod();
  pod["metadata"]["annotations"]["gvirtus.io/backend-gpu"] = "3";  // the author's: not trusted
  Assignment none{"10.0.0.7:9999", "gvirtus-system/backend-0", "{}", "", std::nullopt, ""};
  CHECK_FALSE(
      assignedCopy(pod, none)["metadata"]["annotations"].contains("gvirtus.io/backend-gpu"));
  Assignment second = none;
  second.gpuIndex = 1;
  const json out = assignedCopy(pod, second);
  CHECK(out["metadata"]["annotations"]["gvirtus.io/backend-gpu"] == "1");
  CHECK(assignedCopy(out, second) == out);
}
