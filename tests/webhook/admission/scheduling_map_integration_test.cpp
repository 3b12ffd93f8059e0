// gpu-scheduling-map on the real control plane (issue 7), with the real controller-manager
// and kube-scheduler and four kwok nodes: StatefulSet pods land on their nodes with their
// CUDA_VISIBLE_DEVICES; a pod without an entry is placed freely; a broken map shows in the
// StatefulSet's events.

#include <catch2/catch.hpp>
#include <cstdio>

#include "webhook/cluster_fixtures.h"

using namespace gvirtus::webhook::testing;
using gvirtus::KubeClient;
namespace resources = gvirtus::resources;

namespace {

const char* kClassicMap = "0=node1:0,1\n1=node2:2\n2=node3:0,1,2\n3=node4:3\n4=node4:3\n";

json statefulSet(const std::string& ns, const std::string& name, int replicas,
                 const std::string& map) {
  return {{"apiVersion", "apps/v1"},
          {"kind", "StatefulSet"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"replicas", replicas},
            {"serviceName", name},
            {"podManagementPolicy", "Parallel"},
            {"selector", {{"matchLabels", {{"app", name}}}}},
            {"template",
             {{"metadata",
               {{"labels", {{"app", name}}}, {"annotations", {{"gpu-scheduling-map", map}}}}},
              {"spec",
               {{"containers", json::array({{{"name", "cuda"}, {"image", "nvidia/cuda"}},
                                            {{"name", "sidecar"}, {"image", "busybox"}}})}}}}}}}};
}

std::string envValue(const json& container, const std::string& name) {
  for (const auto& e : container.value("env", json::array())) {
    if (e["name"] == name) {
      return e.value("value", "");
    }
  }
  return "<unset>";
}

}  // namespace

TEST_CASE("gpu-scheduling-map pins StatefulSet pods to nodes and GPUs",
          "[scheduling-map][integration]") {
  auto client = gvirtus::testing::adminClient();
  for (int i = 1; i <= 4; ++i) {
    ensureNode(*client, "node" + std::to_string(i), json::object());
  }
  TestNamespace ns(*client, "wh-map");
  ns.waitForDefaultServiceAccount();
  // The map needs no backend and no API server: static backends and TLS files.
  RegisteredWebhook webhook(*client, {"--static-backends", "127.0.0.1:9999"});

  auto created = client->create(resources::kStatefulSets, ns.name(),
                                statefulSet(ns.name(), "web", 5, kClassicMap));
  INFO((created ? "" : created.error().message));
  REQUIRE(created.has_value());

  const std::map<int, std::pair<std::string, std::string>> expected = {{0, {"node1", "0,1"}},
                                                                       {1, {"node2", "2"}},
                                                                       {2, {"node3", "0,1,2"}},
                                                                       {3, {"node4", "3"}},
                                                                       {4, {"node4", "3"}}};
  for (const auto& [index, placement] : expected) {
    const std::string name = "web-" + std::to_string(index);
    INFO(name << " Running on " << placement.first);
    REQUIRE(eventually([&] { return podRunning(*client, ns.name(), name); }, 90s));
    auto pod = client->get(resources::kPods, ns.name(), name);
    REQUIRE(pod.has_value());
    CHECK((*pod)["spec"]["nodeName"] == placement.first);
    for (const auto& container : (*pod)["spec"]["containers"]) {
      CHECK(envValue(container, "CUDA_VISIBLE_DEVICES") == placement.second);
    }
  }
  auto [code, wide] = gvirtus::testing::kubectl({"-n", ns.name(), "get", "pod", "-o", "wide"});
  CHECK(code == 0);
  std::printf("kubectl get pod -o wide:\n%s\n", wide.c_str());
  auto [envCode, envs] = gvirtus::testing::kubectl(
      {"-n", ns.name(), "get", "pod", "-o",
       "custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,"
       "CUDA_VISIBLE_DEVICES:.spec.containers[0].env[?(@.name==\"CUDA_VISIBLE_DEVICES\")].value"});
  CHECK(envCode == 0);
  std::printf("%s\n", envs.c_str());

  SECTION("scaled to 6: pod 5 has no entry and is placed freely") {
    auto scaled = client->patch(resources::kStatefulSets, ns.name(), "web",
                                gvirtus::PatchType::Merge, R"({"spec":{"replicas":6}})");
    REQUIRE(scaled.has_value());
    REQUIRE(eventually([&] { return podRunning(*client, ns.name(), "web-5"); }, 90s));
    auto pod = client->get(resources::kPods, ns.name(), "web-5");
    REQUIRE(pod.has_value());
    CHECK(envValue((*pod)["spec"]["containers"][0], "CUDA_VISIBLE_DEVICES") == "<unset>");
    CHECK_FALSE((*pod)["spec"].contains("affinity"));
    CHECK_FALSE((*pod)["spec"]["nodeName"].get<std::string>().empty());

    // The warning, as a client creating such a pod sees it.
    TempDir dir;
    json probe = {{"apiVersion", "v1"},
                  {"kind", "Pod"},
                  {"metadata",
                   {{"name", "web-9"},
                    {"namespace", ns.name()},
                    {"annotations", {{"gpu-scheduling-map", kClassicMap}}}}},
                  {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "x"}}})}}}};
    auto [probeCode, output] = gvirtus::testing::kubectl(
        {"create", "--dry-run=server", "-f", dir.write("probe.json", probe.dump())});
    CHECK(probeCode == 0);
    CHECK_THAT(output, Catch::Contains("Warning: gpu-scheduling-map has no entry for pod 9"));
  }

  SECTION("a broken map: pod creation is denied and the StatefulSet's events say why") {
    auto broken = client->create(resources::kStatefulSets, ns.name(),
                                 statefulSet(ns.name(), "broken", 2, "0=node1:0\n1=node2:x\n"));
    REQUIRE(broken.has_value());
    std::string messages;
    REQUIRE(eventually(
        [&] {
          gvirtus::ListOptions options;
          options.fieldSelector = "involvedObject.kind=StatefulSet,involvedObject.name=broken";
          auto events = client->list(resources::kEvents, ns.name(), options);
          messages.clear();
          for (const auto& event : events ? events->items : std::vector<json>{}) {
            if (event.value("reason", "") == "FailedCreate") {
              messages += event.value("message", "") + "\n";
            }
          }
          return messages.find("gpu-scheduling-map line 2") != std::string::npos;
        },
        60s));
    INFO(messages);
    CHECK_THAT(messages, Catch::Contains("devices \"x\" are not comma-separated integers"));
    CHECK_FALSE(client->get(resources::kPods, ns.name(), "broken-0").has_value());
  }
}
