// GVirtuS pods wait, Pending behind the scheduling gate, until a backend can take them
// (issue 6), on the real control plane with the real kube-scheduler: the webhook runs as
// a host process registered by URL, backend pods are bound to kwok GPU nodes with a load
// report, and released pods are scheduled onto kwok frontend nodes and run there.
//
// Nodes wait-frontend-1/2 and wait-gpu-1/2 are this file's own (deleted at the end of each
// test); backend pods carry a per-test label that the webhook's --backend-selector names,
// so that backends of other tests are never chosen.

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
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

bool readyWithIp(const json& pod) {
  if (!pod.contains("status") || pod["status"].value("podIP", "").empty()) {
    return false;
  }
  for (const auto& condition : pod["status"].value("conditions", json::array())) {
    if (condition.value("type", "") == "Ready") {
      return condition.value("status", "") == "True";
    }
  }
  return false;
}

std::string annotation(const json& pod, const std::string& key) {
  return pod["metadata"].value("annotations", json::object()).value(key, "");
}

// Nearest-rank percentile of samples in milliseconds.
double percentile(std::vector<double> samples, double p) {
  std::sort(samples.begin(), samples.end());
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(samples.size())));
  return samples[std::max<size_t>(rank, 1) - 1];
}

// When things happened, as one watch in the test process sees them: a backend pod turning
// Ready with an IP, a GVirtuS pod losing its gate. One watch over all namespaces, because a
// watch delivers events in the API server's revision order: the backend's Ready is written
// before the release it causes, so it is seen first. Two watches (one per namespace) could
// deliver the release a millisecond before the Ready and make a latency negative.
class Timeline {
 public:
  Timeline(KubeClient& client, std::string podNamespace, std::string runLabel)
      : podNamespace_(std::move(podNamespace)),
        runLabel_(std::move(runLabel)),
        pods_(client, resources::kPods) {
    auto ready = [this](const json& pod) {
      if (isThisRunsBackend(pod) && readyWithIp(pod)) {
        mark(ready_, pod);
      }
    };
    pods_.addHandlers({ready,
                       [this, ready](const json& old, const json& now) {
                         if (isThisTestsPod(now) && gated(old) && !gated(now)) {
                           mark(released_, now);
                         }
                         ready(now);
                       },
                       nullptr});
    pods_.start();
    REQUIRE(pods_.waitForSync(std::chrono::seconds(20)));
  }

  std::optional<Clock::time_point> readyAt(const std::string& backend) {
    return at(ready_, backend);
  }
  std::optional<Clock::time_point> releasedAt(const std::string& pod) { return at(released_, pod); }

 private:
  bool isThisTestsPod(const json& pod) const {
    return pod["metadata"].value("namespace", "") == podNamespace_;
  }
  bool isThisRunsBackend(const json& pod) const {
    const json& metadata = pod["metadata"];
    const json labels = metadata.value("labels", json::object());
    return metadata.value("namespace", "") == kBackendNamespace &&
           labels.value("app.kubernetes.io/component", "") == "backend" &&
           labels.value("gvirtus.io/test-run", "") == runLabel_;
  }
  void mark(std::map<std::string, Clock::time_point>& into, const json& pod) {
    std::lock_guard lock(mutex_);
    into.emplace(pod["metadata"].value("name", ""), Clock::now());  // the first time only
  }
  std::optional<Clock::time_point> at(std::map<std::string, Clock::time_point>& from,
                                      const std::string& name) {
    std::lock_guard lock(mutex_);
    auto it = from.find(name);
    return it == from.end() ? std::nullopt : std::optional(it->second);
  }

  std::string podNamespace_;
  std::string runLabel_;
  std::mutex mutex_;
  std::map<std::string, Clock::time_point> ready_;
  std::map<std::string, Clock::time_point> released_;
  ResourceCache pods_;
};

// Two frontend nodes and two GPU nodes of this test, a namespace for the GVirtuS pods, one
// for the webhook (its Lease), and the webhook's flags for this test's backends.
struct WaitCluster {
  std::unique_ptr<KubeClient> client = gvirtus::testing::adminClient();
  std::string run = randomSuffix();
  TestNamespace ns{*client, "wait-it"};
  TestNamespace webhookNs{*client, "wait-wh"};
  std::string selector = "app.kubernetes.io/component=backend,gvirtus.io/test-run=" + run;
  std::vector<std::string> backends;  // created by this test, deleted at the end

  static constexpr const char* kFrontends[] = {"wait-frontend-1", "wait-frontend-2"};
  static constexpr const char* kGpuNodes[] = {"wait-gpu-1", "wait-gpu-2"};

  WaitCluster() {
    ns.waitForDefaultServiceAccount();
    ensureNamespace(*client, kBackendNamespace);
    for (const char* name : kFrontends) {
      ensureNode(*client, name,
                 {{"gvirtus.io/frontend.allowed", "true"}, {"gvirtus.io/test-pool", "wait"}},
                 {{"nvidia.com/gpu", "8"}});
    }
    for (const char* name : kGpuNodes) {
      ensureNode(*client, name,
                 {{"gvirtus.io/backend.allowed", "true"}, {"gvirtus.io/gpu.present", "true"}});
    }
  }
  ~WaitCluster() {
    // Pods still waiting go first: a later test's webhook would otherwise release them (the
    // oldest first) onto its own backends while this namespace is being deleted.
    auto stillWaiting = [&] {
      std::vector<std::string> names;
      if (auto pods = client->list(resources::kPods, ns.name())) {
        for (const auto& pod : pods->items) {
          if (gated(pod)) {
            names.push_back(pod["metadata"].value("name", ""));
          }
        }
      }
      return names;
    };
    for (const auto& name : stillWaiting()) {
      (void)client->remove(resources::kPods, ns.name(), name);
    }
    (void)eventually([&] { return stillWaiting().empty(); }, 20s);
    for (const auto& name : backends) {
      (void)client->remove(resources::kPods, kBackendNamespace, name);
    }
    for (const char* name : kFrontends) {
      (void)client->remove(resources::kNodes, "", name);
    }
    for (const char* name : kGpuNodes) {
      (void)client->remove(resources::kNodes, "", name);
    }
  }

  std::vector<std::string> webhookArgs(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {"--backend-namespace", kBackendNamespace,
                                     "--backend-selector",  selector,
                                     "--namespace",         webhookNs.name()};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  // A GVirtuS pod, kept on this test's frontend nodes by its own node selector (the webhook
  // adds gvirtus.io/frontend.allowed=true).
  json createPod(const std::string& name, json annotations = json::object()) {
    json pod = gvirtusPod();
    pod["metadata"]["name"] = name;
    pod["metadata"]["namespace"] = ns.name();
    pod["metadata"]["annotations"] = annotations;
    pod["spec"]["nodeSelector"] = {{"gvirtus.io/test-pool", "wait"}};
    pod["spec"]["terminationGracePeriodSeconds"] = 0;
    auto created = client->create(resources::kPods, ns.name(), pod);
    INFO((created ? "" : created.error().message));
    REQUIRE(created.has_value());
    return *created;
  }

  // Changes an annotation of the test's pod `name`: for the controller, a change of a waiting
  // pod, which asks for a pass.
  void poke(const std::string& name) {
    const json patch = {
        {"metadata", {{"annotations", {{"test.gvirtus.io/poke", std::to_string(++pokes)}}}}}};
    auto patched = client->patch(resources::kPods, ns.name(), name, PatchType::Merge, patch.dump());
    INFO((patched ? "" : patched.error().message));
    REQUIRE(patched.has_value());
  }
  int pokes = 0;

  json getPod(const std::string& name) {
    auto pod = client->get(resources::kPods, ns.name(), name);
    INFO((pod ? "" : pod.error().message));
    REQUIRE(pod.has_value());
    return *pod;
  }

  // A backend pod of this test on `node`, Running and Ready there (kwok) with a fresh load.
  std::string createBackend(const std::string& name, const std::string& node, int connections,
                            int maxSessions) {
    auto created =
        client->create(resources::kPods, kBackendNamespace,
                       backendPod(kBackendNamespace, name, node, run, connections, maxSessions));
    INFO((created ? "" : created.error().message));
    REQUIRE(created.has_value());
    backends.push_back(name);
    return name;
  }
  std::string backendIp(const std::string& name) {
    return podStatus(*client, kBackendNamespace, name).value("podIP", "");
  }
  // What the backend shim would publish once frontends connect.
  void setConnections(const std::string& backend, int connections, int maxSessions) {
    const json load = {{"connections", connections},
                       {"maxSessions", maxSessions},
                       {"gpus", json::array({{{"index", 0},
                                              {"memoryTotalMiB", 81920},
                                              {"memoryUsedMiB", 1024},
                                              {"utilization", 5}}})},
                       {"updated", utcNow()}};
    auto patched = client->patch(
        resources::kPods, kBackendNamespace, backend, PatchType::Merge,
        json{{"metadata", {{"annotations", {{"gvirtus.io/load", load.dump()}}}}}}.dump());
    REQUIRE(patched.has_value());
  }

  // The Events with `reason` on pod `name`.
  std::vector<json> events(const std::string& name, const std::string& reason) {
    ListOptions options;
    options.fieldSelector = "involvedObject.name=" + name + ",reason=" + reason;
    auto list = client->list(resources::kEvents, ns.name(), options);
    return list ? list->items : std::vector<json>{};
  }
  // Times an Event with `reason` was recorded on pod `name` (the counts summed).
  int64_t eventCount(const std::string& name, const std::string& reason) {
    int64_t total = 0;
    for (const auto& e : events(name, reason)) {
      total += e.value("count", 1);
    }
    return total;
  }
};

std::string podName(int i) {
  return "pod-" + std::to_string(i);
}

// Released as the contract says: the backend's IP:PORT, its pod, properties naming it, no
// gate and no waiting status; one BackendAssigned Event naming IP:PORT.
void checkReleasedTo(WaitCluster& cluster, const std::string& name, const std::string& backend) {
  INFO("pod " << name << " released to " << backend);
  const json pod = cluster.getPod(name);
  const std::string endpoint = cluster.backendIp(backend) + ":9999";
  CHECK_FALSE(gated(pod));
  CHECK(annotation(pod, "gvirtus.io/backend") == endpoint);
  CHECK(annotation(pod, "gvirtus.io/backend-pod") ==
        std::string(kBackendNamespace) + "/" + backend);
  CHECK(annotation(pod, "gvirtus.io/backend-status").empty());
  const json properties = json::parse(annotation(pod, "gvirtus.io/properties"));
  CHECK(properties["communicator"][0]["endpoint"]["server_address"].get<std::string>() + ":9999" ==
        endpoint);
  REQUIRE(eventually([&] { return cluster.eventCount(name, "BackendAssigned") == 1; }));
  const auto events = cluster.events(name, "BackendAssigned");
  CHECK_THAT(events[0].value("message", ""), Catch::Contains(endpoint));
  CHECK(events[0]["source"]["component"] == "gvirtus-webhook");
}

// Scheduled by kube-scheduler onto one of this test's frontend nodes, and Running (kwok).
void checkRunsOnFrontend(WaitCluster& cluster, const std::string& name) {
  INFO("pod " << name);
  REQUIRE(eventually([&] { return podRunning(*cluster.client, cluster.ns.name(), name); }, 60s));
  const std::string node = cluster.getPod(name)["spec"].value("nodeName", "");
  CHECK(node.starts_with("wait-frontend-"));
}

void printLatency(const std::string& what, const std::vector<double>& samples) {
  REQUIRE_FALSE(samples.empty());
  std::printf(
      "release latency (%s): backend Ready -> pod released, %zu pods: p50 %.1f ms, p99 "
      "%.1f ms, max %.1f ms\n",
      what.c_str(), samples.size(), percentile(samples, 0.50), percentile(samples, 0.99),
      *std::max_element(samples.begin(), samples.end()));
  std::fflush(stdout);
}

double millisecondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// The waiting-pod controller's passes so far, from the webhook's metrics.
double passes(const WebhookProcess& webhook) {
  return webhook.metric("gvirtus_webhook_release_passes_total");
}

// Asks for a pass (a change of the waiting pod `pod`) and waits until a pass that began after
// the ask has ended: what it would release is released, what it would tell is told. Two asks,
// since the pass that ends first may be one that was running at the first ask.
void awaitFreshPass(WaitCluster& cluster, const WebhookProcess& webhook, const std::string& pod) {
  for (int ask = 0; ask < 2; ++ask) {
    const double before = passes(webhook);
    cluster.poke(pod);
    REQUIRE(eventually([&] { return passes(webhook) > before; }, 30s));
  }
}

}  // namespace

TEST_CASE(
    "five waiting pods: a backend with room for three releases the three oldest and a "
    "second backend the rest",
    "[webhook][waiting][integration]") {
  WaitCluster cluster;
  RegisteredWebhook webhook(*cluster.client, cluster.webhookArgs());
  Timeline timeline(*cluster.client, cluster.ns.name(), cluster.run);

  for (int i = 1; i <= 5; ++i) {
    const json pod = cluster.createPod(podName(i));
    CHECK(gated(pod));
    CHECK(annotation(pod, "gvirtus.io/backend-status") == "waiting");
    CHECK(annotation(pod, "gvirtus.io/backend").empty());
  }
  for (int i = 1; i <= 5; ++i) {
    INFO("pod " << podName(i) << " waits, Pending, with an Event saying why");
    REQUIRE(
        eventually([&] { return cluster.eventCount(podName(i), "WaitingForBackend") == 1; }, 30s));
    const auto events = cluster.events(podName(i), "WaitingForBackend");
    CHECK_THAT(events[0].value("message", ""), Catch::Contains("no GVirtuS backend is ready"));
    CHECK(events[0]["type"] == "Normal");
    const json pod = cluster.getPod(podName(i));
    CHECK(gated(pod));
    CHECK(pod["status"].value("phase", "") == "Pending");
  }
  // Held by the gate, not by a lack of nodes: the scheduler says so.
  REQUIRE(eventually([&] {
    for (const auto& c : cluster.getPod(podName(1))["status"].value("conditions", json::array())) {
      if (c.value("type", "") == "PodScheduled") {
        return c.value("reason", "") == "SchedulingGated";
      }
    }
    return false;
  }));

  const std::string first =
      cluster.createBackend("wait-backend-1-" + cluster.run, "wait-gpu-1", 0, 3);
  std::vector<double> latencies;
  for (int i = 1; i <= 3; ++i) {
    INFO("pod " << podName(i) << " (among the three oldest) is released");
    REQUIRE(eventually([&] { return !gated(cluster.getPod(podName(i))); }, 30s));
  }
  // Exactly three: the two youngest still wait, with the new reason.
  for (int i = 4; i <= 5; ++i) {
    INFO("pod " << podName(i) << " still waits");
    REQUIRE(eventually([&] {
      for (const auto& e : cluster.events(podName(i), "WaitingForBackend")) {
        if (e.value("message", "").find("1 at maxSessions") != std::string::npos) {
          return true;
        }
      }
      return false;
    }));
  }
  // A later pass leaves them waiting too.
  awaitFreshPass(cluster, webhook.process(), podName(4));
  for (int i = 4; i <= 5; ++i) {
    CHECK(gated(cluster.getPod(podName(i))));
  }
  for (int i = 1; i <= 3; ++i) {
    checkReleasedTo(cluster, podName(i), first);
    checkRunsOnFrontend(cluster, podName(i));
    auto ready = timeline.readyAt(first);
    auto released = timeline.releasedAt(podName(i));
    REQUIRE(ready.has_value());
    REQUIRE(released.has_value());
    latencies.push_back(millisecondsBetween(*ready, *released));
  }

  // The frontends connected (the shim reports it); a second backend takes the rest.
  cluster.setConnections(first, 3, 3);
  const std::string second =
      cluster.createBackend("wait-backend-2-" + cluster.run, "wait-gpu-2", 0, 3);
  for (int i = 4; i <= 5; ++i) {
    REQUIRE(eventually([&] { return !gated(cluster.getPod(podName(i))); }, 30s));
    checkReleasedTo(cluster, podName(i), second);
    checkRunsOnFrontend(cluster, podName(i));
    auto ready = timeline.readyAt(second);
    auto released = timeline.releasedAt(podName(i));
    REQUIRE(ready.has_value());
    REQUIRE(released.has_value());
    latencies.push_back(millisecondsBetween(*ready, *released));
  }
  printLatency("five pods, two backends", latencies);

  // The webhook's own account of it.
  const std::string metrics = gvirtus::testing::httpGet(webhook.process().healthPort(), "/metrics");
  CHECK(gvirtus::testing::metricValue(metrics, "gvirtus_webhook_releases_total") == 5);
  CHECK(gvirtus::testing::metricValue(metrics, "gvirtus_webhook_release_latency_seconds_count") ==
        5);
  CHECK(gvirtus::testing::metricValue(metrics, "gvirtus_webhook_waiting_pods") == 0);
  CHECK(gvirtus::testing::metricValue(metrics, "gvirtus_webhook_oldest_waiting_pod_age_seconds") ==
        0);
  // The serving certificate of the test's TLS files (WebhookProcess): a day.
  const double expiry = gvirtus::testing::metricValue(
      metrics, "gvirtus_webhook_certificate_expiry_timestamp_seconds");
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(expiry > now + 23 * 3600.0);
  CHECK(expiry <= now + 24 * 3600.0);
}

TEST_CASE(
    "a pod asking for more GPU memory than any backend has stays waiting with that "
    "reason and KAI gpu-fraction counts against the GPU",
    "[webhook][waiting][integration]") {
  WaitCluster cluster;
  RegisteredWebhook webhook(*cluster.client, cluster.webhookArgs());
  // Two pods wanting 0.6 of one GPU, and one wanting 100Gi, all waiting for a backend.
  cluster.createPod("fraction-1", {{"gpu-fraction", "0.6"}});
  cluster.createPod("fraction-2", {{"gpu-fraction", "0.6"}});
  cluster.createPod("huge", {{"gvirtus.io/gpu-memory", "100Gi"}});
  for (const char* name : {"fraction-1", "fraction-2", "huge"}) {
    REQUIRE(eventually([&] { return cluster.eventCount(name, "WaitingForBackend") == 1; }, 30s));
  }

  // One GPU of 80 GiB with 1 GiB used: one 0.6 share fits, the second does not, 100Gi never.
  const std::string backend =
      cluster.createBackend("wait-backend-mem-" + cluster.run, "wait-gpu-1", 0, 16);
  REQUIRE(eventually([&] { return !gated(cluster.getPod("fraction-1")); }, 30s));
  checkReleasedTo(cluster, "fraction-1", backend);
  auto saysWhy = [&](const std::string& name, const std::string& reason) {
    return eventually([&] {
      for (const auto& e : cluster.events(name, "WaitingForBackend")) {
        if (e.value("message", "").find(reason) != std::string::npos) {
          return true;
        }
      }
      return false;
    });
  };
  CHECK(saysWhy("huge", "1 without a GPU with 102400 MiB free"));
  CHECK(saysWhy("fraction-2", "1 without a GPU with 0.6 of its memory free"));
  awaitFreshPass(cluster, webhook.process(), "huge");
  for (const char* name : {"fraction-2", "huge"}) {
    INFO(name);
    const json pod = cluster.getPod(name);
    CHECK(gated(pod));
    CHECK(annotation(pod, "gvirtus.io/backend-status") == "waiting");
    CHECK(pod["status"].value("phase", "") == "Pending");
  }
  checkRunsOnFrontend(cluster, "fraction-1");

  // Created now, a 100Gi pod is told at admission, and waits too.
  const json late = cluster.createPod("huge-late", {{"gvirtus.io/gpu-memory", "100Gi"}});
  CHECK(gated(late));
  CHECK(saysWhy("huge-late", "without a GPU with 102400 MiB free"));
}

TEST_CASE("release latency over rounds of waiting pods and new backends",
          "[webhook][waiting][integration]") {
  WaitCluster cluster;
  RegisteredWebhook webhook(*cluster.client, cluster.webhookArgs());
  Timeline timeline(*cluster.client, cluster.ns.name(), cluster.run);
  constexpr int kRounds = 10;
  constexpr int kPodsPerRound = 2;
  std::vector<double> latencies;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::string> pods;
    for (int i = 0; i < kPodsPerRound; ++i) {
      pods.push_back("round-" + std::to_string(round) + "-" + std::to_string(i));
      CHECK(gated(cluster.createPod(pods.back())));
    }
    for (const auto& name : pods) {
      REQUIRE(eventually([&] { return cluster.eventCount(name, "WaitingForBackend") == 1; }, 30s));
    }
    const std::string backend =
        cluster.createBackend("wait-round-" + std::to_string(round) + "-" + cluster.run,
                              WaitCluster::kGpuNodes[round % 2], 0, kPodsPerRound);
    for (const auto& name : pods) {
      INFO("round " << round << ", pod " << name);
      REQUIRE(eventually([&] { return timeline.releasedAt(name).has_value(); }, 30s));
      REQUIRE(eventually([&] { return timeline.readyAt(backend).has_value(); }, 30s));
      latencies.push_back(
          millisecondsBetween(*timeline.readyAt(backend), *timeline.releasedAt(name)));
      CHECK(annotation(cluster.getPod(name), "gvirtus.io/backend") ==
            cluster.backendIp(backend) + ":9999");
    }
    // Full for good: its frontends connected.
    cluster.setConnections(backend, kPodsPerRound, kPodsPerRound);
  }
  printLatency(std::to_string(kRounds) + " rounds of " + std::to_string(kPodsPerRound) +
                   " pods, one new backend each",
               latencies);
  for (double ms : latencies) {
    CHECK(ms >= 0);
    CHECK(ms < 5000);
  }
}

TEST_CASE(
    "two webhooks with --leader-elect: only the leader acts and when it is killed the "
    "other takes over without assigning any pod twice",
    "[webhook][waiting][integration]") {
  WaitCluster cluster;
  ElectedWebhooks webhooks(*cluster.client, cluster.webhookNs.name(), cluster.webhookArgs());
  const std::string leader = webhooks.waitForLeader();
  const std::string follower = webhooks.other(leader);
  INFO("leader " << leader << ", follower " << follower);

  constexpr int kPods = 4;
  for (int i = 1; i <= kPods; ++i) {
    CHECK(gated(cluster.createPod(podName(i))));
  }
  for (int i = 1; i <= kPods; ++i) {
    REQUIRE(
        eventually([&] { return cluster.eventCount(podName(i), "WaitingForBackend") == 1; }, 30s));
    // Only the leader tells: the follower runs no controller.
    CHECK(cluster.events(podName(i), "WaitingForBackend")[0].value("reportingInstance", "") ==
          leader);
  }

  // The leader dies without giving up its Lease; a backend appears meanwhile.
  const auto killed = Clock::now();
  webhooks.kill(leader);
  const std::string backend =
      cluster.createBackend("wait-backend-ha-" + cluster.run, "wait-gpu-1", 0, 16);
  for (int i = 1; i <= kPods; ++i) {
    INFO("pod " << podName(i) << " released by the new leader");
    REQUIRE(eventually([&] { return !gated(cluster.getPod(podName(i))); }, 30s));
  }
  const double takeover = millisecondsBetween(killed, Clock::now());
  CHECK(webhooks.holder() == follower);
  for (int i = 1; i <= kPods; ++i) {
    checkReleasedTo(cluster, podName(i), backend);  // one BackendAssigned Event each
    const auto assigned = cluster.events(podName(i), "BackendAssigned");
    CHECK(assigned[0].value("reportingInstance", "") == follower);
  }
  std::printf(
      "leader killed -> all %d waiting pods released by the new leader: %.0f ms "
      "(lease duration 4s)\n",
      kPods, takeover);
  std::fflush(stdout);
  // Still exactly one each after two more passes of the new leader (the pods' binding asks
  // for them, the 10 s resync at the latest): nothing released them again.
  const double released = passes(webhooks.process(follower));
  REQUIRE(eventually([&] { return passes(webhooks.process(follower)) >= released + 2; }, 30s));
  for (int i = 1; i <= kPods; ++i) {
    CHECK(cluster.eventCount(podName(i), "BackendAssigned") == 1);
  }
}
