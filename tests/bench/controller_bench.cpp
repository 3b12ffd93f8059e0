// The webhook's waiting-pod controller at scale, on the real control plane: gvirtus-webhook
// as a host process registered by URL (tests/webhook/cluster_fixtures.h), no backend at
// first; 1,000 GVirtuS pods created through it all wait behind the gate gvirtus.io/backend.
// Then backend pods appear (bound to a kwok node, which makes them Ready with an IP) and the
// controller releases every waiting pod. Figures: time from the backends' creation (and from
// the first one Ready) to the last pod released, release latency per pod, the API requests
// the webhook made per pod (apiserver_request_total deltas at the API server: pod patches,
// Event writes) and its resident memory. A scheduling gate of the benchmark's own keeps the
// scheduler out of it. When the webhook binary has no waiting-pod controller the benchmark
// says so and passes.
//
//   tests/cluster/with-cluster.sh bench-ctl build/tests/controller_bench
//   (BENCH_WAITING_PODS, default 1000; BENCH_BACKENDS, default 4)

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_env.h"
#include "bench/bench_output.h"
#include "bench/cluster_bench.h"
#include "bench/load_generator.h"
#include "bench/process_stats.h"
#include "common/cache/resource_cache.h"
#include "common/kube/access/config.h"
#include "common/kube/client.h"
#include "support/cluster_env.h"
#include "webhook/cluster_fixtures.h"

using namespace gvirtus;
using namespace gvirtus::bench;
using gvirtus::testing::eventually;
using gvirtus::testing::httpGet;
using gvirtus::testing::metricValue;
using gvirtus::webhook::testing::RegisteredWebhook;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr const char* kNamespace = "bench-waiting";
constexpr const char* kBackendNamespace = "gvirtus-system";
constexpr const char* kRunLabel = "bench.gvirtus.io/run";
constexpr const char* kHoldGate = "bench.gvirtus.io/hold";

json waitingPod(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", kNamespace},
            {"labels", {{"gvirtus.io/enabled", "true"}, {kRunLabel, "waiting"}}}}},
          {"spec",
           {{"schedulingGates", json::array({{{"name", kHoldGate}}})},
            {"containers", json::array({{{"name", "app"},
                                         {"image", "example/app"},
                                         {"command", {"python", "train.py"}}}})}}}};
}

// The webhook's startup log says whether the waiting-pod controller runs ("on").
std::string controllerState(const std::string& output) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    auto entry = json::parse(line, nullptr, false);
    if (entry.is_object() && entry.value("msg", "") == "gvirtus-webhook started") {
      return entry.value("waitingPodController", "absent");
    }
  }
  return "absent";
}

}  // namespace

TEST_CASE("waiting-pod controller: 1,000 waiting pods released when backends appear", "[bench]") {
  const int pods = envInt("BENCH_WAITING_PODS", 1000);
  const int backends = envInt("BENCH_BACKENDS", 4);
  const std::string section = "4";
  auto client = unthrottledClient();
  gvirtus::webhook::testing::ensureNamespace(*client, kNamespace);
  gvirtus::webhook::testing::ensureNamespace(*client, kBackendNamespace);
  gvirtus::webhook::testing::ensureNode(*client, "bench-gpu",
                                        {{"gvirtus.io/backend.allowed", "true"}});

  RegisteredWebhook webhook(*client, {});
  const int pid = webhook.process().child().pid();
  const int health = webhook.process().healthPort();
  const std::string state = controllerState(webhook.process().child().output());
  if (state != "on") {
    const std::string text = format(
        "Not measured: this build of gvirtus-webhook has no waiting-pod controller "
        "(its startup log says `waitingPodController: %s`).\n",
        state.c_str());
    std::printf("\n%s", text.c_str());
    append("controller.md", text);
    return;
  }
  const double idleRss = residentMemory(pid).now;
  RssSampler sampler(pid);

  // Release times, from a watch of the benchmark's pods.
  std::mutex mutex;
  std::map<std::string, bench::Clock::time_point> releasedAt;
  std::map<std::string, std::string> backendOf;
  ResourceCache watch(*client, resources::kPods, kNamespace, std::string(kRunLabel) + "=waiting");
  auto observe = [&](const json& pod) {
    if (!released(pod)) {
      return;
    }
    std::lock_guard lock(mutex);
    const std::string name = pod["metadata"]["name"];
    if (releasedAt.emplace(name, bench::Clock::now()).second) {
      backendOf[name] = pod["metadata"]["annotations"]["gvirtus.io/backend"];
    }
  };
  watch.addHandlers({.onAdd = observe,
                     .onUpdate = [&](const json&, const json& now) { observe(now); },
                     .onDelete = {}});
  watch.start();
  REQUIRE(watch.waitForSync(30s));
  // When each backend pod first was Ready with an IP.
  std::vector<bench::Clock::time_point> readyAt;
  ResourceCache backendWatch(*client, resources::kPods, kBackendNamespace,
                             std::string(kRunLabel) + "=backend");
  auto observeBackend = [&](const json& pod) {
    if (!podReady(pod)) {
      return;
    }
    std::lock_guard lock(mutex);
    readyAt.push_back(bench::Clock::now());
  };
  backendWatch.addHandlers({.onAdd = observeBackend,
                            .onUpdate =
                                [&](const json& old, const json& now) {
                                  if (!podReady(old)) {
                                    observeBackend(now);
                                  }
                                },
                            .onDelete = {}});
  backendWatch.start();
  REQUIRE(backendWatch.waitForSync(30s));

  // 1) The pods, through the webhook: every one comes back gated.
  const auto requests0 = apiRequests();
  std::atomic<int> next = 0;
  std::atomic<int> waiting = 0;
  std::atomic<int> failed = 0;
  const auto createStart = bench::Clock::now();
  {
    std::vector<std::jthread> creators;
    for (int t = 0; t < 8; ++t) {
      creators.emplace_back([&] {
        for (int i = next++; i < pods; i = next++) {
          auto created = client->create(resources::kPods, kNamespace,
                                        waitingPod("waiting-" + std::to_string(i)));
          (created ? (gvirtus::webhook::testing::gated(*created) ? waiting : failed) : failed)++;
        }
      });
    }
  }
  const double createSeconds =
      std::chrono::duration<double>(bench::Clock::now() - createStart).count();
  REQUIRE(failed == 0);
  REQUIRE(waiting == pods);
  // The controller has seen them all (its gauge), and its WaitingForBackend Events are out.
  REQUIRE(eventually(
      [&] {
        return metricValue(httpGet(health, "/metrics"), "gvirtus_webhook_waiting_pods") == pods;
      },
      120s));
  std::this_thread::sleep_for(5s);
  const double waitingRss = residentMemory(pid).now;
  const auto requests1 = apiRequests();

  // 2) Backends appear; every waiting pod is released.
  const auto backendsCreated = bench::Clock::now();
  for (int b = 0; b < backends; ++b) {
    json pod = gvirtus::webhook::testing::backendPod(
        kBackendNamespace, "backend-" + std::to_string(b), "bench-gpu", "bench", 0, 0);
    pod["metadata"]["labels"][kRunLabel] = "backend";
    auto created = client->create(resources::kPods, kBackendNamespace, pod);
    INFO((created ? "" : created.error().message));
    REQUIRE(created.has_value());
  }
  const bool done = eventually(
      [&] {
        std::lock_guard lock(mutex);
        return releasedAt.size() >= static_cast<size_t>(pods);
      },
      std::chrono::minutes(5));
  // The Events trail the releases (their own client, rate-limited): wait until no more are
  // written for 3 s, at most 90 s.
  auto eventWrites = [&](const std::map<std::string, double>& counts) {
    return delta(requests0, counts, "POST events") + delta(requests0, counts, "PATCH events");
  };
  auto requests2 = apiRequests();
  for (auto deadline = bench::Clock::now() + 90s; bench::Clock::now() < deadline;) {
    std::this_thread::sleep_for(3s);
    auto now = apiRequests();
    const bool settled = eventWrites(now) == eventWrites(requests2);
    requests2 = std::move(now);
    if (settled) {
      break;
    }
  }
  std::map<std::string, double> eventsByReason;
  // A fresh client: the first one's pooled connections have been idle long enough for the
  // API server to close them, which KubeClient does not always survive.
  ListOptions pages;
  pages.limit = 500;
  if (auto events = unthrottledClient()->listAll(resources::kEvents, kNamespace, pages); events) {
    for (const auto& event : events->items) {
      eventsByReason[event.value("reason", "")] += event.value("count", 1);
    }
  } else {
    std::printf("listing the Events failed: %s\n", events.error().message.c_str());
  }
  const std::string metrics = httpGet(health, "/metrics");
  const double loadedRss = std::max(sampler.highest(), waitingRss);

  std::vector<double> sinceReady;
  std::map<std::string, int> perBackend;
  bench::Clock::time_point firstReady = backendsCreated;
  bench::Clock::time_point lastRelease = backendsCreated;
  {
    std::lock_guard lock(mutex);
    if (!readyAt.empty()) {
      firstReady = *std::min_element(readyAt.begin(), readyAt.end());
    }
    for (const auto& [name, at] : releasedAt) {
      sinceReady.push_back(std::chrono::duration<double>(at - firstReady).count());
      lastRelease = std::max(lastRelease, at);
      ++perBackend[backendOf[name]];
    }
  }
  const double fromCreated = std::chrono::duration<double>(lastRelease - backendsCreated).count();
  const double fromReady = std::chrono::duration<double>(lastRelease - firstReady).count();
  const double n = static_cast<double>(pods);
  auto phase = [&](const std::map<std::string, double>& a, const std::map<std::string, double>& b,
                   const std::string& key) { return delta(a, b, key) / n; };
  std::string spread;
  for (const auto& [backend, count] : perBackend) {
    spread += format("%s%d", spread.empty() ? "" : " / ", count);
  }

  const double perPod = phase(requests1, requests2, "PATCH pods") + eventWrites(requests2) / n;
  // The writes a release itself costs: its pod PATCH and its BackendAssigned Event. The
  // WaitingForBackend Event a pod got while it waited belongs to the wait; one still queued
  // when the pod is released is withdrawn, never written.
  const double perRelease =
      phase(requests1, requests2, "PATCH pods") + eventsByReason["BackendAssigned"] / n;
  std::string text = format(
      "%d GVirtuS pods created through the webhook (8 concurrent clients, %.1f s) while no "
      "backend exists: all %d admitted waiting behind the gate. Then %d backend pods are "
      "created at once (bound to a kwok node, which makes them Ready with an IP; load "
      "reports with no session limit), and the controller releases every waiting pod.%s\n\n"
      "| | |\n|---|---|\n"
      "| backends created → last pod released | %.1f s |\n"
      "| first backend Ready → last pod released | %.1f s |\n"
      "| first backend Ready → first pod released (as the bench's watches see both) | %.0f ms "
      "|\n"
      "| release time after the first backend was Ready, p50 / p99 | %.1f / %.1f s |\n"
      "| pods released | %zu of %d (per backend: %s) |\n"
      "| releases per second, first backend Ready → last pod released | %.1f |\n"
      "| pod PATCHes per pod (release phase) | %.3f |\n"
      "| Event writes per pod, whole run (POST + PATCH) | %.3f |\n"
      "| Events on the pods: WaitingForBackend / BackendAssigned | %.0f / %.0f |\n"
      "| API writes per released pod for the release (pod PATCH + BackendAssigned Event) | %.2f "
      "|\n"
      "| API writes per pod in all (pod PATCH + Event writes) | %.2f |\n"
      "| pod LISTs during the run (relists) | %.0f |\n"
      "| webhook resident memory: idle / %d pods waiting / highest | %.1f / %.1f / %.1f MiB "
      "(%.0f KiB per waiting pod) |\n",
      pods, createSeconds, waiting.load(), backends,
      done ? "" : " **Not all pods were released within 5 minutes.**", fromCreated, fromReady,
      1000 * percentile(sinceReady, 0.0), percentile(sinceReady, 0.5), percentile(sinceReady, 0.99),
      sinceReady.size(), pods, spread.c_str(),
      static_cast<double>(sinceReady.size()) / std::max(fromReady, 1e-3),
      phase(requests1, requests2, "PATCH pods"), eventWrites(requests2) / n,
      eventsByReason["WaitingForBackend"], eventsByReason["BackendAssigned"], perRelease, perPod,
      delta(requests0, requests2, "LIST pods"), pods, idleRss / 1048576, waitingRss / 1048576,
      loadedRss / 1048576, (waitingRss - idleRss) / 1024 / n);
  const double perSecond = static_cast<double>(sinceReady.size()) / std::max(fromReady, 1e-3);
  const KubeClientOptions clientDefaults;
  if (std::abs(perSecond - clientDefaults.qps) < 0.2 * clientDefaults.qps) {
    text += format(
        "\nThe releases run at about the Kubernetes client's default client-side rate limit "
        "(`KubeClientOptions`: %.0f requests/s, burst %d), one pod PATCH each, which the "
        "webhook's client keeps: that limit, not the controller's work, sets the time to "
        "done.\n",
        clientDefaults.qps, clientDefaults.burst);
  }
  text += format(
      "\nThe webhook's own figures: `gvirtus_webhook_releases_total` %.0f; "
      "`gvirtus_webhook_release_latency_seconds` mean %.2f s (backend able to take the pod → "
      "pod released).\n",
      metricValue(metrics, "gvirtus_webhook_releases_total"),
      metricValue(metrics, "gvirtus_webhook_release_latency_seconds_sum") /
          std::max(1.0, metricValue(metrics, "gvirtus_webhook_release_latency_seconds_count")));
  std::printf("\nwaiting-pod controller\n%s\n", text.c_str());
  append("controller.md", text);
  writeCdf("release", sinceReady);
  summaryRow(format("%d waiting pods released after backends appear: time to done", pods),
             format("%.1f s from the first backend Ready (%.1f s from their creation)", fromReady,
                    fromCreated),
             section);
  summaryRow(
      "API writes per released pod: the release (pod PATCH + BackendAssigned Event) / in all",
      format("%.2f / %.2f (in all: with the WaitingForBackend Events written while the "
             "pods waited, %.0f of %d)",
             perRelease, perPod, eventsByReason["WaitingForBackend"], pods),
      section);
  memoryRow("gvirtus-webhook (with API server, waiting-pod controller)", idleRss, loadedRss,
            format("%d waiting pods cached, then released", pods));
  CHECK(done);
  watch.stop();
  backendWatch.stop();
}
