// Backends that follow demand (issue 21), on the real control plane with the real
// kube-scheduler: the webhook runs as a host process with --autoscale-candidates naming
// this test's kwok GPU nodes; the test plays the backend DaemonSet (a backend pod on every
// candidate opted in, removed when it is opted out), since kwok nodes run no pods.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "common/cache/resource_cache.h"
#include "webhook/cluster_fixtures.h"
#include "webhook/fixtures.h"

using namespace gvirtus::webhook::testing;
using gvirtus::KubeClient;
using gvirtus::ListOptions;
using gvirtus::PatchType;
using gvirtus::ResourceCache;
namespace resources = gvirtus::resources;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kBackendNamespace = "gvirtus-system";

std::string labelOf(const json& object, const std::string& key) {
  return object["metadata"].value("labels", json::object()).value(key, "");
}
std::string annotationOf(const json& object, const std::string& key) {
  return object["metadata"].value("annotations", json::object()).value(key, "");
}

double secondsSince(Clock::time_point from) {
  return std::chrono::duration<double>(Clock::now() - from).count();
}

// Counts the writes to the autoscaler's keys on nodes (gvirtus.io/backend.allowed,
// gvirtus.io/autoscaled, gvirtus.io/backend.draining), as a watch sees them: status
// heartbeats and other controllers' annotations do not count.
class NodeWrites {
 public:
  NodeWrites(KubeClient& client, const std::string& selector)
      : cache_(client, resources::kNodes, "", selector) {
    cache_.addHandlers({nullptr,
                        [this](const json& old, const json& now) {
                          if (ours(old) != ours(now)) {
                            std::lock_guard lock(mutex_);
                            ++writes_[now["metadata"].value("name", "")];
                          }
                        },
                        nullptr});
    cache_.start();
    REQUIRE(cache_.waitForSync(std::chrono::seconds(20)));
  }
  static std::string ours(const json& node) {
    return labelOf(node, "gvirtus.io/backend.allowed") + "|" +
           annotationOf(node, "gvirtus.io/autoscaled") + "|" +
           annotationOf(node, "gvirtus.io/backend.draining");
  }
  int total() {
    std::lock_guard lock(mutex_);
    int n = 0;
    for (const auto& [node, count] : writes_) {
      n += count;
    }
    return n;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, int> writes_;
  ResourceCache cache_;
};

// A frontend node, two candidate GPU nodes, one GPU node opted in by hand (also matching
// the candidate selector), and the webhook's flags for them.
struct AutoscaleCluster {
  std::unique_ptr<KubeClient> client = gvirtus::testing::adminClient();
  std::string run = randomSuffix();
  TestNamespace ns{*client, "scale-it"};
  TestNamespace webhookNs{*client, "scale-wh"};
  std::string backendSelector = "app.kubernetes.io/component=backend,gvirtus.io/test-run=" + run;
  std::string candidateSelector = "gvirtus.io/test-candidate=" + run;
  std::vector<std::string> candidates = {"scale-gpu-1-" + run, "scale-gpu-2-" + run};
  std::string byHand = "scale-gpu-hand-" + run;
  std::string frontend = "scale-frontend-" + run;
  std::map<std::string, std::string> backendOn;  // node -> backend pod

  AutoscaleCluster() {
    ns.waitForDefaultServiceAccount();
    ensureNamespace(*client, kBackendNamespace);
    ensureNode(*client, frontend,
               {{"gvirtus.io/frontend.allowed", "true"}, {"gvirtus.io/test-pool", run}},
               {{"nvidia.com/gpu", "8"}});
    for (const auto& name : candidates) {
      ensureNode(*client, name,
                 {{"gvirtus.io/test-candidate", run},
                  {"gvirtus.io/backend.allowed", "false"},
                  {"nvidia.com/gpu.present", "true"}},
                 {{"nvidia.com/gpu", "1"}});
    }
    ensureNode(*client, byHand,
               {{"gvirtus.io/test-candidate", run},
                {"gvirtus.io/backend.allowed", "true"},
                {"nvidia.com/gpu.present", "true"}});
  }
  ~AutoscaleCluster() {
    if (auto pods = client->list(resources::kPods, ns.name())) {
      for (const auto& pod : pods->items) {
        (void)client->remove(resources::kPods, ns.name(), pod["metadata"].value("name", ""));
      }
    }
    for (const auto& [node, backend] : backendOn) {
      (void)client->remove(resources::kPods, kBackendNamespace, backend);
    }
    for (const auto& name : candidates) {
      (void)client->remove(resources::kNodes, "", name);
    }
    (void)client->remove(resources::kNodes, "", byHand);
    (void)client->remove(resources::kNodes, "", frontend);
  }

  std::vector<std::string> webhookArgs(std::vector<std::string> extra) const {
    // Debug logs: the autoscaler's looks are what the tests wait for.
    std::vector<std::string> args = {"--backend-namespace",
                                     kBackendNamespace,
                                     "--backend-selector",
                                     backendSelector,
                                     "--namespace",
                                     webhookNs.name(),
                                     "--autoscale-candidates",
                                     candidateSelector,
                                     "--log-level",
                                     "debug"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  json node(const std::string& name) {
    auto got = client->get(resources::kNodes, "", name);
    REQUIRE(got.has_value());
    return *got;
  }
  std::vector<std::string> optedIn() {
    std::vector<std::string> out;
    for (const auto& name : candidates) {
      if (labelOf(node(name), "gvirtus.io/backend.allowed") == "true") {
        out.push_back(name);
      }
    }
    return out;
  }

  json createPod(const std::string& name) {
    json pod = gvirtusPod();
    pod["metadata"]["name"] = name;
    pod["metadata"]["namespace"] = ns.name();
    pod["spec"]["nodeSelector"] = {{"gvirtus.io/test-pool", run}};
    pod["spec"]["terminationGracePeriodSeconds"] = 0;
    auto created = client->create(resources::kPods, ns.name(), pod);
    INFO((created ? "" : created.error().message));
    REQUIRE(created.has_value());
    return *created;
  }
  json getPod(const std::string& name) {
    auto pod = client->get(resources::kPods, ns.name(), name);
    REQUIRE(pod.has_value());
    return *pod;
  }

  // What the backend DaemonSet does on an opted-in node: a backend pod, Ready (kwok).
  void startBackend(const std::string& node) {
    const std::string name = "scale-backend-" + std::to_string(backendOn.size()) + "-" + run;
    auto created = client->create(resources::kPods, kBackendNamespace,
                                  backendPod(kBackendNamespace, name, node, run, 0, 4));
    INFO((created ? "" : created.error().message));
    REQUIRE(created.has_value());
    backendOn[node] = name;
  }
  void stopBackend(const std::string& node) {
    (void)client->remove(resources::kPods, kBackendNamespace, backendOn.at(node));
    backendOn.erase(node);
  }

  int64_t eventCount(const std::string& where, const std::string& object,
                     const std::string& reason) {
    ListOptions options;
    options.fieldSelector = "involvedObject.name=" + object + ",reason=" + reason;
    auto list = client->list(resources::kEvents, where, options);
    int64_t total = 0;
    for (const auto& event : list ? list->items : std::vector<json>{}) {
      total += event.value("count", 1);
    }
    return total;
  }
};

// Whether the webhook logged a look of its autoscaler with these numbers ("autoscaler looked",
// logged when a look's conclusion differs from the last); the look is the proof that it
// decided, which a test would otherwise sleep for.
bool looked(const WebhookProcess& webhook, const json& numbers) {
  for (const auto& entry : webhook.logged("autoscaler looked")) {
    bool all = true;
    for (const auto& [key, value] : numbers.items()) {
      all = all && entry.value(key, json()) == value;
    }
    if (all) {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE(
    "pods wait, a candidate is opted in after the threshold, the pods are released, the idle "
    "backend is drained then opted out, and a node opted in by hand is never changed",
    "[webhook][autoscale][integration]") {
  AutoscaleCluster cluster;
  const json handBefore = cluster.node(cluster.byHand);
  NodeWrites writes(*cluster.client, cluster.candidateSelector);
  RegisteredWebhook webhook(*cluster.client,
                            cluster.webhookArgs({"--autoscale-max", "2", "--scale-up-after", "3s",
                                                 "--scale-down-after", "5s"}));

  const auto created = Clock::now();
  CHECK(gated(cluster.createPod("app-1")));
  CHECK(gated(cluster.createPod("app-2")));
  // Not before the threshold: it has seen both pods wait, none of them long enough yet.
  REQUIRE(eventually([&] { return looked(webhook.process(), {{"waiting", 2}, {"due", 0}}); }));
  CHECK(cluster.optedIn().empty());

  REQUIRE(eventually([&] { return !cluster.optedIn().empty(); }, 30s));
  const double toOptIn = secondsSince(created);
  const auto optedIn = cluster.optedIn();
  REQUIRE(optedIn.size() == 1);  // two pods, one backend's sessions
  const std::string node = optedIn.front();
  CHECK_FALSE(annotationOf(cluster.node(node), "gvirtus.io/autoscaled").empty());
  CHECK(toOptIn >= 2.0);  // creationTimestamp holds whole seconds
  REQUIRE(eventually([&] { return cluster.eventCount("default", node, "BackendOptedIn") == 1; }));
  REQUIRE(eventually(
      [&] { return cluster.eventCount(cluster.ns.name(), "app-1", "TriggeredScaleUp") == 1; }));
  const int upWrites = writes.total();

  cluster.startBackend(node);
  for (const char* pod : {"app-1", "app-2"}) {
    INFO("pod " << pod);
    REQUIRE(eventually([&] { return !gated(cluster.getPod(pod)); }, 30s));
    CHECK(annotationOf(cluster.getPod(pod), "gvirtus.io/backend-pod") ==
          std::string(kBackendNamespace) + "/" + cluster.backendOn.at(node));
  }
  const double toRelease = secondsSince(created);
  // Still one node: the backend took both.
  CHECK(cluster.optedIn().size() == 1);
  const std::string metrics = gvirtus::testing::httpGet(webhook.process().healthPort(), "/metrics");
  CHECK(gvirtus::testing::metricValue(metrics, "gvirtus_webhook_autoscale_backends") == 1);
  CHECK(gvirtus::testing::metricValue(
            metrics, "gvirtus_webhook_autoscale_events_total{direction=\"up\"}") == 1);

  // The pods run (assigned to the backend): past the idle window, it stays.
  auto kept = [&] {
    for (const auto& entry : webhook.process().logged(
             "autoscaler: a backend without connections still has pods; it stays")) {
      if (entry.value("node", "") == node && entry.value("pods", 0) == 2) {
        return true;
      }
    }
    return false;
  };
  REQUIRE(eventually(kept, 30s));
  CHECK(secondsSince(created) >= 5.0);
  CHECK(cluster.optedIn().size() == 1);
  CHECK(annotationOf(cluster.node(node), "gvirtus.io/backend.draining").empty());

  // The work ends: drained first, then opted out.
  const int beforeDown = writes.total();
  for (const char* pod : {"app-1", "app-2"}) {
    (void)cluster.client->remove(resources::kPods, cluster.ns.name(), pod);
  }
  const auto idle = Clock::now();
  REQUIRE(eventually(
      [&] { return !annotationOf(cluster.node(node), "gvirtus.io/backend.draining").empty(); },
      30s));
  CHECK(labelOf(cluster.node(node), "gvirtus.io/backend.allowed") == "true");
  REQUIRE(eventually(
      [&] { return labelOf(cluster.node(node), "gvirtus.io/backend.allowed") == "false"; }, 30s));
  const double toOptOut = secondsSince(idle);
  const json after = cluster.node(node);
  CHECK(annotationOf(after, "gvirtus.io/autoscaled").empty());
  CHECK(annotationOf(after, "gvirtus.io/backend.draining").empty());
  CHECK(cluster.eventCount("default", node, "BackendDraining") == 1);
  REQUIRE(eventually([&] { return cluster.eventCount("default", node, "BackendOptedOut") == 1; }));
  cluster.stopBackend(node);
  const int downWrites = writes.total() - beforeDown;

  // No flapping: its look at the cluster without the backend opts nothing in.
  REQUIRE(eventually([&] {
    return looked(webhook.process(), {{"waiting", 0}, {"backends", 0}, {"autoscaled", 0}});
  }));
  CHECK(cluster.optedIn().empty());

  // The node opted in by hand: the autoscaler's keys as they were (other controllers, such
  // as the node TTL controller, may annotate it meanwhile).
  const json handAfter = cluster.node(cluster.byHand);
  CHECK(NodeWrites::ours(handAfter) == NodeWrites::ours(handBefore));
  CHECK(labelOf(handAfter, "gvirtus.io/backend.allowed") == "true");
  CHECK(annotationOf(handAfter, "gvirtus.io/autoscaled").empty());

  std::printf(
      "autoscale: first waiting pod -> node opted in %.1f s (scale-up-after 3s), -> pods "
      "released %.1f s (backend started by the test); scale-up %d node write(s); idle -> "
      "opted out %.1f s (scale-down-after 5s + drain 5s), scale-down %d node write(s)\n",
      toOptIn, toRelease, upWrites, toOptOut, downWrites);
  std::fflush(stdout);
  CHECK(upWrites == 1);
  CHECK(downWrites == 2);
}

TEST_CASE("a leader killed right after it opted a node in: the new leader adds no other",
          "[webhook][autoscale][integration]") {
  AutoscaleCluster cluster;
  ElectedWebhooks webhooks(*cluster.client, cluster.webhookNs.name(),
                           cluster.webhookArgs({"--autoscale-max", "2", "--scale-up-after", "2s",
                                                "--scale-down-after", "10m"}));
  const std::string leader = webhooks.waitForLeader();

  CHECK(gated(cluster.createPod("app-1")));
  REQUIRE(eventually([&] { return !cluster.optedIn().empty(); }, 30s));
  webhooks.kill(leader);

  // The other replica leads, sees the node on its way, and opts in nothing more: its first
  // look with the pod due counts the node as its own.
  const std::string next = webhooks.other(leader);
  REQUIRE(eventually([&] { return webhooks.holder() == next; }, 30s));
  REQUIRE(eventually(
      [&] {
        return looked(webhooks.process(next), {{"waiting", 1}, {"due", 1}});
      },
      30s));
  CHECK(looked(webhooks.process(next), {{"due", 1}, {"autoscaled", 1}, {"optedIn", 0}}));
  CHECK_FALSE(looked(webhooks.process(next), {{"optedIn", 1}}));
  const auto optedIn = cluster.optedIn();
  REQUIRE(optedIn.size() == 1);
  cluster.startBackend(optedIn.front());
  REQUIRE(eventually([&] { return !gated(cluster.getPod("app-1")); }, 30s));
  CHECK(cluster.optedIn().size() == 1);
}
