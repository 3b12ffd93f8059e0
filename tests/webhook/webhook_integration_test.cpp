// gvirtus-webhook on the real control plane (issue 5): the webhook runs as a host process,
// registered by clientConfig.url; pods created through the API server come back mutated;
// backend pods bound to kwok nodes, with load reports, are chosen by policy.

#include <catch2/catch.hpp>
#include <map>

#include "webhook/cluster_fixtures.h"
#include "webhook/fixtures.h"

using namespace gvirtus::webhook::testing;
using gvirtus::KubeClient;
using gvirtus::WriteOptions;
namespace resources = gvirtus::resources;

namespace {

constexpr const char* kBackendNamespace = "gvirtus-system";

// Two frontend nodes, two GPU nodes in two zones, two backend pods (connections 2 and 1),
// and the webhook watching exactly these backends.
struct Cluster {
  std::unique_ptr<KubeClient> client = gvirtus::testing::adminClient();
  std::string run = randomSuffix();
  TestNamespace ns{*client, "wh-it"};
  std::string backendA = "backend-a-" + run;
  std::string backendB = "backend-b-" + run;
  std::unique_ptr<RegisteredWebhook> webhook;
  std::vector<std::pair<std::string, std::string>> ownPods;  // namespace, name

  explicit Cluster(std::vector<std::string> extraArgs = {}) {
    ns.waitForDefaultServiceAccount();
    ensureNamespace(*client, kBackendNamespace);
    for (const char* name : {"wh-frontend-1", "wh-frontend-2"}) {
      ensureNode(*client, name, {{"gvirtus.io/frontend.allowed", "true"}},
                 {{"nvidia.com/gpu", "8"}});
    }
    ensureNode(*client, "wh-gpu-a",
               {{"topology.kubernetes.io/zone", "zone-a"}, {"gvirtus.io/backend.allowed", "true"}});
    ensureNode(*client, "wh-gpu-b",
               {{"topology.kubernetes.io/zone", "zone-b"}, {"gvirtus.io/backend.allowed", "true"}});
    for (auto [name, node, connections] :
         {std::tuple{backendA, "wh-gpu-a", 2}, std::tuple{backendB, "wh-gpu-b", 1}}) {
      auto created =
          client->create(resources::kPods, kBackendNamespace,
                         backendPod(kBackendNamespace, name, node, run, connections, 16));
      INFO((created ? "" : created.error().message));
      REQUIRE(created.has_value());
    }
    for (const auto& name : {backendA, backendB}) {
      INFO("backend pod " << name << " Running with an IP");
      REQUIRE(eventually(
          [&] {
            const json status = podStatus(*client, kBackendNamespace, name);
            return status.value("phase", "") == "Running" && !status.value("podIP", "").empty();
          },
          60s));
    }
    std::vector<std::string> args = {
        "--backend-namespace", kBackendNamespace, "--backend-selector",
        "app.kubernetes.io/component=backend,gvirtus.io/test-run=" + run};
    args.insert(args.end(), extraArgs.begin(), extraArgs.end());
    webhook = std::make_unique<RegisteredWebhook>(*client, args);
    // Both backends known (kwok marks a pod Ready a moment after Running; only Ready
    // backends count), and registered: a dry run (no side effect) gets a backend.
    INFO(webhook->process().child().output());
    REQUIRE(eventually(
        [&] { return webhook->process().metric("gvirtus_webhook_backends_available") == 2; }, 30s));
    REQUIRE(eventually(
        [&] {
          auto pod = create(gvirtusPod(), true);
          return pod && (*pod)["metadata"]
                            .value("annotations", json::object())
                            .contains("gvirtus.io/backend");
        },
        30s));
  }
  ~Cluster() {
    webhook.reset();
    // Every webhook counts the GVirtuS pods assigned in the last minute against their
    // backend's IP:port, and kwok gives the next test's backends the same IPs: the pods go
    // before their backends, and before the next test begins.
    for (const auto& [podNs, name] : ownPods) {
      (void)client->remove(resources::kPods, podNs, name);
    }
    (void)eventually([&] {
      for (const auto& [podNs, name] : ownPods) {
        if (client->get(resources::kPods, podNs, name)) {
          return false;
        }
      }
      return true;
    });
    for (const auto& name : {backendA, backendB}) {
      (void)client->remove(resources::kPods, kBackendNamespace, name);
    }
  }

  gvirtus::Result<json> create(json pod, bool dryRun = false, const std::string& in = {}) {
    const std::string target = in.empty() ? ns.name() : in;
    pod["metadata"]["namespace"] = target;
    pod["metadata"].erase("name");
    pod["metadata"]["generateName"] = "pod-";
    WriteOptions options;
    options.dryRun = dryRun;
    auto made = client->create(resources::kPods, target, pod, options);
    if (made && !dryRun) {
      ownPods.emplace_back(target, (*made)["metadata"].value("name", ""));
    }
    return made;
  }
  json mustCreate(const json& pod) {
    auto created = create(pod);
    INFO((created ? "" : created.error().message));
    REQUIRE(created.has_value());
    return *created;
  }

  std::string backendIp(const std::string& name) {
    return podStatus(*client, kBackendNamespace, name).value("podIP", "");
  }
};

const json& annotationsOf(const json& pod) {
  return pod["metadata"]["annotations"];
}

void checkWired(const json& pod, const std::vector<int>& wired, int containers) {
  for (int i = 0; i < containers; ++i) {
    const json& c = pod["spec"]["containers"][i];
    const bool expected = std::find(wired.begin(), wired.end(), i) != wired.end();
    INFO("container " << c["name"]);
    CHECK(mountsConfig(c) == expected);
    CHECK((envEntry(c, "GVIRTUS_CONFIG") != nullptr) == expected);
    CHECK(c["command"] == json::array({"python", "train.py"}));
  }
}

}  // namespace

TEST_CASE("GVirtuS pods come back mutated as specified", "[webhook][integration]") {
  Cluster cluster;

  SECTION("one container") {
    const json pod = cluster.mustCreate(gvirtusPod());
    const std::string backend = annotationsOf(pod)["gvirtus.io/backend"];
    const std::string backendPod = annotationsOf(pod)["gvirtus.io/backend-pod"];
    CHECK((backendPod == "gvirtus-system/" + cluster.backendA ||
           backendPod == "gvirtus-system/" + cluster.backendB));
    CHECK(backend == cluster.backendIp(backendPod.substr(backendPod.find('/') + 1)) + ":9999");
    const json properties =
        json::parse(annotationsOf(pod)["gvirtus.io/properties"].get<std::string>());
    CHECK(properties["communicator"][0]["endpoint"]["server_address"].get<std::string>() +
              ":9999" ==
          backend);
    checkWired(pod, {0}, 1);
    const json& volume = pod["spec"]["volumes"].back();
    CHECK(volume["name"] == "gvirtus-config");
    CHECK(volume["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"] ==
          "metadata.annotations['gvirtus.io/properties']");
    CHECK(volume["downwardAPI"]["items"][0]["path"] == "properties.json");
    CHECK(pod["spec"]["nodeSelector"]["gvirtus.io/frontend.allowed"] == "true");
    CHECK(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1");
    // Scheduled by kube-scheduler onto a frontend node and Running there (kwok).
    const std::string name = pod["metadata"]["name"];
    REQUIRE(eventually([&] { return podRunning(*cluster.client, cluster.ns.name(), name); }, 60s));
    const std::string node =
        (*cluster.client->get(resources::kPods, cluster.ns.name(), name))["spec"]["nodeName"];
    CHECK(node.starts_with("wh-frontend-"));
  }

  SECTION("several containers") {
    const json pod = cluster.mustCreate(gvirtusPod({"app", "worker", "logger"}));
    checkWired(pod, {0, 1, 2}, 3);
    CHECK(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1");
    CHECK_FALSE(pod["spec"]["containers"][1]["resources"].contains("limits"));
  }

  SECTION("a named subset") {
    json spec = gvirtusPod({"app", "worker", "logger"});
    spec["metadata"]["annotations"] = {{"gvirtus.io/containers", "worker,logger"}};
    const json pod = cluster.mustCreate(spec);
    checkWired(pod, {1, 2}, 3);
    CHECK(pod["spec"]["containers"][1]["resources"]["limits"]["nvidia.com/gpu"] == "1");
  }

  SECTION("a pod that already sets GVIRTUS_CONFIG") {
    json spec = gvirtusPod();
    spec["spec"]["containers"][0]["env"] =
        json::array({{{"name", "GVIRTUS_CONFIG"}, {"value", "/opt/gvirtus/mine.json"}}});
    const json pod = cluster.mustCreate(spec);
    CHECK(pod["spec"]["containers"][0]["env"] ==
          json::array({{{"name", "GVIRTUS_CONFIG"}, {"value", "/opt/gvirtus/mine.json"}}}));
    CHECK(mountsConfig(pod["spec"]["containers"][0]));
  }

  SECTION("a pod with its own nodeSelector and GPU limit") {
    json spec = gvirtusPod({"app", "worker"});
    spec["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", "wh-frontend-2"}};
    spec["spec"]["containers"][1]["resources"] = {{"limits", {{"nvidia.com/gpu", "2"}}}};
    const json pod = cluster.mustCreate(spec);
    CHECK(pod["spec"]["nodeSelector"] == json({{"kubernetes.io/hostname", "wh-frontend-2"},
                                               {"gvirtus.io/frontend.allowed", "true"}}));
    CHECK_FALSE(pod["spec"]["containers"][0]["resources"].contains("limits"));
    CHECK(pod["spec"]["containers"][1]["resources"]["limits"]["nvidia.com/gpu"] == "2");
    const std::string name = pod["metadata"]["name"];
    REQUIRE(eventually([&] { return podRunning(*cluster.client, cluster.ns.name(), name); }, 60s));
    CHECK((*cluster.client->get(resources::kPods, cluster.ns.name(), name))["spec"]["nodeName"] ==
          "wh-frontend-2");
  }

  SECTION("a dry run gets the same mutation") {
    auto dry = cluster.create(gvirtusPod(), true);
    REQUIRE(dry.has_value());
    CHECK(annotationsOf(*dry).contains("gvirtus.io/properties"));
    checkWired(*dry, {0}, 1);
  }

  SECTION("an unknown container name is denied, naming it") {
    json spec = gvirtusPod();
    spec["metadata"]["annotations"] = {{"gvirtus.io/containers", "trainer"}};
    auto denied = cluster.create(spec);
    REQUIRE_FALSE(denied.has_value());
    CHECK_THAT(denied.error().message, Catch::Contains("denied the request"));
    CHECK_THAT(denied.error().message, Catch::Contains("\"trainer\""));
  }

  SECTION("unlabelled pods are untouched") {
    json spec = gvirtusPod();
    spec["metadata"]["labels"] = {{"app", "plain"}};
    const json pod = cluster.mustCreate(spec);
    CHECK_FALSE(pod["metadata"].contains("annotations"));
    CHECK_FALSE(pod["spec"].contains("nodeSelector"));
  }

  SECTION("a pod in an excluded namespace is untouched") {
    auto created = cluster.create(gvirtusPod(), false, kBackendNamespace);
    REQUIRE(created.has_value());
    CHECK_FALSE(created->at("metadata").contains("annotations"));
    CHECK_FALSE(created->at("spec").contains("nodeSelector"));
    CHECK(created->at("spec")["containers"][0].value("env", json::array()).empty());
    (void)cluster.client->remove(resources::kPods, kBackendNamespace,
                                 created->at("metadata")["name"]);
  }

  SECTION("bad bodies posted directly get 400") {
    auto client = cluster.webhook->process().client(cluster.webhook->tls().caFile);
    for (const std::string body : {"not json", "{\"kind\":\"AdmissionReview\"}"}) {
      auto response = client->Post("/mutate", body, "application/json");
      REQUIRE(response);
      CHECK(response->status == 400);
      CHECK_THAT(response->body, Catch::StartsWith("bad AdmissionReview: "));
    }
  }
}

TEST_CASE("three pods across two backends with different loads land by policy",
          "[webhook][integration]") {
  SECTION("least-connections (default), counting own assignments") {
    Cluster cluster;
    std::map<std::string, int> landed;
    for (int i = 0; i < 3; ++i) {
      const json pod = cluster.mustCreate(gvirtusPod());
      ++landed[annotationsOf(pod)["gvirtus.io/backend-pod"]];
    }
    // B (1 connection) takes the first; then both stand at 2 and alternate.
    CHECK(landed["gvirtus-system/" + cluster.backendB] == 2);
    CHECK(landed["gvirtus-system/" + cluster.backendA] == 1);
  }

  SECTION("round-robin per pod, same-zone with a preferred zone affinity") {
    Cluster cluster;
    json spec = gvirtusPod();
    spec["metadata"]["annotations"] = {{"gvirtus.io/backend-policy", "round-robin"}};
    std::set<std::string> seen;
    for (int i = 0; i < 2; ++i) {
      seen.insert(
          annotationsOf(cluster.mustCreate(spec))["gvirtus.io/backend-pod"].get<std::string>());
    }
    CHECK(seen.size() == 2);

    json zoned = gvirtusPod();
    zoned["metadata"]["annotations"] = {{"gvirtus.io/backend-policy", "same-zone"}};
    zoned["spec"]["nodeSelector"] = {{"topology.kubernetes.io/zone", "zone-a"}};
    const json pod = cluster.mustCreate(zoned);
    CHECK(annotationsOf(pod)["gvirtus.io/backend-pod"] == "gvirtus-system/" + cluster.backendA);
    CHECK(pod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
             [0]["preference"]["matchExpressions"][0]["values"] == json::array({"zone-a"}));
  }

  SECTION("--policy round-robin for every pod") {
    Cluster cluster({"--policy", "round-robin"});
    std::map<std::string, int> landed;
    for (int i = 0; i < 4; ++i) {
      ++landed[annotationsOf(cluster.mustCreate(gvirtusPod()))["gvirtus.io/backend-pod"]];
    }
    CHECK(landed["gvirtus-system/" + cluster.backendA] == 2);
    CHECK(landed["gvirtus-system/" + cluster.backendB] == 2);
  }
}
