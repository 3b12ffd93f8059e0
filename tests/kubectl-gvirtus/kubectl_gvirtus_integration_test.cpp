// kubectl-gvirtus against the real control plane, with the real webhook: a backend at its
// maxSessions makes a GVirtuS pod wait, the plugin shows the backend and the waiting pod
// with the controller's reason; once the backend has room the pod is released and `why`
// names its backend. Run through tests/cluster/with-cluster.sh (make integration-test).
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "webhook/cluster_fixtures.h"
#include "webhook/fixtures.h"

using namespace gvirtus::webhook::testing;
using gvirtus::PatchType;
using nlohmann::json;
namespace resources = gvirtus::resources;

namespace {

constexpr const char* kFrontend = "kg-frontend-1";
constexpr const char* kGpuNode = "kg-gpu-1";

// The plugin with the test cluster's kubeconfig; {exit code, stdout and stderr}.
std::pair<int, std::string> plugin(std::vector<std::string> args) {
  args.insert(args.begin(), {gvirtus::testing::binDir() + "/kubectl-gvirtus", "--kubeconfig",
                             gvirtus::testing::kubeconfigPath()});
  return gvirtus::testing::runCommand(std::move(args));
}

json pluginJson(const std::vector<std::string>& args) {
  auto [code, out] = plugin(args);
  INFO(out);
  REQUIRE(code == 0);
  json parsed = json::parse(out, nullptr, false);
  REQUIRE_FALSE(parsed.is_discarded());
  return parsed;
}

std::string load(int connections, int maxSessions) {
  return json{{"connections", connections},
              {"maxSessions", maxSessions},
              {"gpus", json::array({{{"index", 0},
                                     {"memoryTotalMiB", 81920},
                                     {"memoryUsedMiB", 1024},
                                     {"utilization", 5}}})},
              {"updated", utcNow()}}
      .dump();
}

}  // namespace

TEST_CASE("kubectl gvirtus status, backends and why on a live cluster", "[kubectl-gvirtus]") {
  auto client = gvirtus::testing::adminClient();
  const std::string run = randomSuffix();
  TestNamespace apps{*client, "kg-apps"};
  TestNamespace backendsNs{*client, "kg-backends"};
  TestNamespace webhookNs{*client, "kg-webhook"};
  apps.waitForDefaultServiceAccount();
  backendsNs.waitForDefaultServiceAccount();
  ensureNode(*client, kFrontend, {{"gvirtus.io/frontend.allowed", "true"}, {"kg-pool", run}},
             {{"nvidia.com/gpu", "8"}});
  ensureNode(*client, kGpuNode,
             {{"gvirtus.io/backend.allowed", "true"}, {"gvirtus.io/gpu.present", "true"}});
  struct Nodes {
    gvirtus::KubeClient& client;
    ~Nodes() {
      (void)client.remove(resources::kNodes, "", kFrontend);
      (void)client.remove(resources::kNodes, "", kGpuNode);
    }
  } nodes{*client};

  // One backend, full: 1 session of 1.
  const std::string selector = "app.kubernetes.io/component=backend,gvirtus.io/test-run=" + run;
  const std::string backend = "kg-backend-" + run;
  json backendObject = backendPod(backendsNs.name(), backend, kGpuNode, run, 1, 1);
  backendObject["metadata"]["annotations"]["gvirtus.io/load"] = load(1, 1);
  REQUIRE(client->create(resources::kPods, backendsNs.name(), backendObject).has_value());
  REQUIRE(eventually([&] { return podRunning(*client, backendsNs.name(), backend); }, 30s));
  // Read at each check: under load kwok has been seen to give the pod another IP after it
  // first reported Running, and the plugin and the webhook show the current one.
  auto backendIp = [&] {
    return podStatus(*client, backendsNs.name(), backend).value("podIP", "");
  };
  REQUIRE_FALSE(backendIp().empty());
  const std::vector<std::string> scope = {"--backend-namespace", backendsNs.name(),
                                          "--backend-selector", selector};

  RegisteredWebhook webhook(
      *client, {"--backend-namespace", backendsNs.name(), "--backend-selector", selector,
                "--namespace", webhookNs.name()});
  json pod = gvirtusPod();
  pod["metadata"]["name"] = "kg-train";
  pod["metadata"]["namespace"] = apps.name();
  pod["spec"]["nodeSelector"] = {{"kg-pool", run}};
  pod["spec"]["terminationGracePeriodSeconds"] = 0;
  REQUIRE(client->create(resources::kPods, apps.name(), pod).has_value());

  // Waiting, with the controller's reason.
  json status;
  auto args = scope;
  args.insert(args.begin(), {"status", "-o", "json"});
  REQUIRE(eventually(
      [&] {
        status = pluginJson(args);
        for (const auto& w : status["waiting"]) {
          if (w["name"] == "kg-train" &&
              w["reason"].get<std::string>().find("at maxSessions") != std::string::npos) {
            return true;
          }
        }
        return false;
      },
      30s));
  INFO(status.dump(2));
  REQUIRE(status["backends"].size() == 1);
  const json& b = status["backends"][0];
  CHECK(b["name"] == backend);
  CHECK(b["node"] == kGpuNode);
  CHECK(b["endpoint"] == backendIp() + ":9999");
  CHECK(b["ready"] == true);
  CHECK(b["load"]["connections"] == 1);
  CHECK(b["load"]["maxSessions"] == 1);
  CHECK(b["load"]["gpus"].size() == 1);
  CHECK(b["pods"] == 0);

  // What an operator sees (kept in the test log).
  auto textArgs = scope;
  textArgs.insert(textArgs.begin(), "status");
  auto [textCode, text] = plugin(textArgs);
  std::printf("$ kubectl gvirtus status\n%s\n", text.c_str());
  CHECK(textCode == 0);
  CHECK_THAT(text, Catch::Contains("Backends: 1 ready of 1, sessions 1/1; pods waiting: 1"));
  CHECK_THAT(text, Catch::Contains("kg-train"));

  auto [whyCode, why] = plugin({"why", "kg-train", "-n", apps.name()});
  std::printf("$ kubectl gvirtus why kg-train\n%s\n", why.c_str());
  CHECK(whyCode == 0);
  CHECK_THAT(why, Catch::Contains("waits for a GVirtuS backend"));
  CHECK_THAT(why, Catch::Contains("1 at maxSessions"));
  CHECK_THAT(why, Catch::Contains("WaitingForBackend"));

  // Room on the backend: the controller releases the pod; why names the backend.
  REQUIRE(
      client
          ->patch(resources::kPods, backendsNs.name(), backend, PatchType::Merge,
                  json{{"metadata", {{"annotations", {{"gvirtus.io/load", load(0, 1)}}}}}}.dump())
          .has_value());
  // The Event is written after the release, by the webhook's event recorder: wait for both.
  json explained;
  auto assignedEvent = [&] {
    for (const auto& e : explained["events"]) {
      if (e["reason"] == "BackendAssigned") {
        return true;
      }
    }
    return false;
  };
  CHECK(eventually(
      [&] {
        explained = pluginJson({"why", "pod/kg-train", "--namespace", apps.name(), "-ojson"});
        return explained["state"] == "assigned" && assignedEvent();
      },
      30s));
  INFO(explained.dump(2));
  REQUIRE(explained["state"] == "assigned");
  CHECK(explained["backend"] == backendIp() + ":9999");
  CHECK(explained["backendPod"] == backendsNs.name() + "/" + backend);
  CHECK(assignedEvent());
  auto backendsArgs = scope;
  backendsArgs.insert(backendsArgs.begin(), {"backends", "-o", "json"});
  CHECK(pluginJson(backendsArgs)["backends"][0]["pods"] == 1);

  // As a kubectl plugin: kubectl finds kubectl-gvirtus on PATH, the plugin reads $KUBECONFIG.
  const char* path = std::getenv("PATH");
  std::vector<std::string> viaKubectl = {
      "/usr/bin/env",
      "PATH=" + gvirtus::testing::binDir() + ":" + (path != nullptr ? path : "/usr/bin:/bin"),
      "KUBECONFIG=" + gvirtus::testing::kubeconfigPath(),
      gvirtus::testing::clusterBin() + "/kubectl",
      "gvirtus",
      "backends"};
  viaKubectl.insert(viaKubectl.end(), scope.begin(), scope.end());
  auto [kubectlCode, table] = gvirtus::testing::runCommand(viaKubectl);
  INFO(table);
  CHECK(kubectlCode == 0);
  CHECK_THAT(table, Catch::Contains("NAME") && Catch::Contains(backend) &&
                        Catch::Contains(backendIp() + ":9999"));

  // A pod that does not exist: exit 1 and the reason.
  auto [missingCode, missing] = plugin({"why", "no-such-pod", "-n", apps.name()});
  CHECK(missingCode == 1);
  CHECK_THAT(missing, Catch::Contains("not found"));
  (void)client->remove(resources::kPods, apps.name(), "kg-train");
  (void)client->remove(resources::kPods, backendsNs.name(), backend);
}
