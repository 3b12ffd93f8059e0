// Pod creation through the real API server (the local control plane), with no webhook, with
// ours and with agnhost's, in one run: both webhooks run on the host, registered by URL with
// their CA (one MutatingWebhookConfiguration each, failurePolicy Fail), each selecting pods
// by the label bench.gvirtus.io/webhook. The pods are the same but for that label, and are
// created interleaved (none, ours, agnhost, none, ...) by a few concurrent clients, so that a
// noisy neighbour hits the three alike. A scheduling gate of the benchmark's own keeps the
// scheduler out of it. Latency is the client's: POST sent to answer read.
//
//   export GVIRTUS_AGNHOST=$(bash tests/bench/build-agnhost.sh)
//   tests/cluster/with-cluster.sh bench-pods build/tests/pod_create_bench
//   (BENCH_PODS per variant, default 500; BENCH_POD_CLIENTS, default 4)

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_env.h"
#include "bench/bench_output.h"
#include "bench/load_generator.h"
#include "common/kube/access/config.h"
#include "common/kube/client.h"
#include "support/child_process.h"
#include "support/cluster_env.h"
#include "webhook/cluster_fixtures.h"
#include "webhook/webhook_process.h"

using namespace gvirtus;
using namespace gvirtus::bench;
using gvirtus::testing::ChildProcess;
using gvirtus::testing::eventually;
using gvirtus::testing::freePort;
using gvirtus::webhook::testing::TempDir;
using gvirtus::webhook::testing::TlsFiles;
using gvirtus::webhook::testing::WebhookProcess;
using nlohmann::json;

namespace {

constexpr const char* kNamespace = "bench-pods";
constexpr const char* kVariantLabel = "bench.gvirtus.io/webhook";
constexpr const char* kHoldGate = "bench.gvirtus.io/hold";
const std::vector<std::string> kVariants = {"none", "ours", "agnhost"};

json benchPod(const std::string& name, const std::string& variant) {
  json containers = json::array();
  for (const char* container : {"app", "worker"}) {
    containers.push_back({{"name", container},
                          {"image", std::string("example/") + container},
                          {"command", {"python", "train.py"}}});
  }
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", kNamespace},
        {"labels", {{"gvirtus.io/enabled", "true"}, {kVariantLabel, variant}}}}},
      {"spec",
       {{"schedulingGates", json::array({{{"name", kHoldGate}}})}, {"containers", containers}}}};
}

// What the created pod says about the webhook that mutated it.
std::string mutatedBy(const json& pod) {
  const json annotations = pod["metadata"].value("annotations", json::object());
  if (annotations.contains("gvirtus.io/backend")) {
    return "ours";
  }
  for (const auto& container : pod["spec"]["containers"]) {
    if (container.value("name", "") == "webhook-added-sidecar") {
      return "agnhost";
    }
  }
  return "none";
}

}  // namespace

TEST_CASE("pod creation through the API server: no webhook, ours, agnhost's", "[bench]") {
  const std::string agnhost = gvirtus::testing::envOr("GVIRTUS_AGNHOST", "");
  if (agnhost.empty()) {
    FAIL("GVIRTUS_AGNHOST is not set: GVIRTUS_AGNHOST=$(bash tests/bench/build-agnhost.sh)");
  }
  const int pods = envInt("BENCH_PODS", 500);
  const int clients = envInt("BENCH_POD_CLIENTS", 4);
  auto client = unthrottledClient(/*maxRetries=*/0);
  gvirtus::webhook::testing::ensureNamespace(*client, kNamespace);

  TempDir dir;
  TlsFiles tls(dir);
  WebhookProcess ours({"--static-backends", "10.0.0.1:9999,10.0.0.2:9999", "--tls-cert-file",
                       tls.certFile, "--tls-key-file", tls.keyFile});
  const int agnhostPort = freePort();
  ChildProcess peer({agnhost, "webhook", "--tls-cert-file", tls.certFile, "--tls-private-key-file",
                     tls.keyFile, "--port", std::to_string(agnhostPort), "--sidecar-image",
                     "example/sidecar"});
  const std::map<std::string, std::string> urls = {
      {"ours", "https://127.0.0.1:" + std::to_string(ours.port()) + "/mutate"},
      {"agnhost", "https://127.0.0.1:" + std::to_string(agnhostPort) + "/mutating-pods-sidecar"}};
  for (const auto& [variant, url] : urls) {
    (void)client->remove(resources::kMutatingWebhookConfigurations, "", "bench-" + variant);
    auto created = client->create(resources::kMutatingWebhookConfigurations, "",
                                  podWebhookRegistration("bench-" + variant, url, tls.ca.certPem,
                                                         kNamespace, {{kVariantLabel, variant}}));
    INFO((created ? "" : created.error().message));
    REQUIRE(created.has_value());
  }
  // The API server picks registrations up from its informer: dry runs until each variant
  // comes back mutated by its own webhook.
  for (const auto& variant : kVariants) {
    INFO("waiting for the " << variant << " registration");
    REQUIRE(eventually(
        [&] {
          WriteOptions dryRun;
          dryRun.dryRun = true;
          auto pod = client->create(resources::kPods, kNamespace,
                                    benchPod("probe-" + variant, variant), dryRun);
          return pod && mutatedBy(*pod) == variant;
        },
        std::chrono::seconds(30)));
  }

  // Creates `count` pods per variant, interleaved, from `clients` threads; returns latencies
  // in ms by variant.
  std::map<std::string, long> failed;
  std::map<std::string, long> wrong;
  auto create = [&](const std::string& prefix, int count) {
    std::map<std::string, std::vector<double>> latencies;
    std::mutex mutex;
    std::atomic<int> next = 0;
    std::vector<std::jthread> threads;
    for (int t = 0; t < clients; ++t) {
      threads.emplace_back([&] {
        std::map<std::string, std::vector<double>> mine;
        std::map<std::string, long> myFailed;
        std::map<std::string, long> myWrong;
        for (int i = next++; i < count * 3; i = next++) {
          const std::string& variant = kVariants[static_cast<size_t>(i) % 3];
          const json pod = benchPod(prefix + "-" + variant + "-" + std::to_string(i / 3), variant);
          const auto t0 = bench::Clock::now();
          auto created = client->create(resources::kPods, kNamespace, pod);
          const double ms =
              std::chrono::duration<double, std::milli>(bench::Clock::now() - t0).count();
          if (!created) {
            ++myFailed[variant];
            continue;
          }
          mine[variant].push_back(ms);
          if (mutatedBy(*created) != variant) {
            ++myWrong[variant];
          }
        }
        std::lock_guard lock(mutex);
        for (auto& [variant, values] : mine) {
          latencies[variant].insert(latencies[variant].end(), values.begin(), values.end());
        }
        for (const auto& [variant, n] : myFailed) {
          failed[variant] += n;
        }
        for (const auto& [variant, n] : myWrong) {
          wrong[variant] += n;
        }
      });
    }
    threads.clear();
    return latencies;
  };

  (void)create("warm", 20);  // connections, caches and JITs warm; not counted
  failed.clear();
  wrong.clear();
  const auto start = bench::Clock::now();
  auto latencies = create("pod", pods);
  const double seconds = std::chrono::duration<double>(bench::Clock::now() - start).count();

  auto p = [&](const std::string& variant, double q) { return percentile(latencies[variant], q); };
  std::string table = format(
      "%d pods per variant (%d in all, %.1f s), created interleaved by %d concurrent clients "
      "into one namespace; each pod two containers, labelled `gvirtus.io/enabled: \"true\"`, "
      "held by a scheduling gate of the benchmark's own so that the scheduler stays out. Both "
      "webhooks are host processes registered by URL (`https://127.0.0.1:PORT/...`) with "
      "their CA, `failurePolicy: Fail`; ours runs with two static backends. Latency: the "
      "client's, from POST to the API server's answer.\n\n"
      "| | no webhook | gvirtus-webhook | agnhost webhook |\n|---|---|---|---|\n",
      pods, pods * 3, seconds, clients);
  for (const auto& [name, q] :
       std::vector<std::pair<std::string, double>>{{"p50", 0.50}, {"p95", 0.95}, {"p99", 0.99}}) {
    table += format("| %s | %.1f ms | %.1f ms (%+.1f ms) | %.1f ms (%+.1f ms) |\n", name.c_str(),
                    p("none", q), p("ours", q), p("ours", q) - p("none", q), p("agnhost", q),
                    p("agnhost", q) - p("none", q));
  }
  table += format("| failed / not mutated as expected | %ld / %ld | %ld / %ld | %ld / %ld |\n",
                  failed["none"], wrong["none"], failed["ours"], wrong["ours"], failed["agnhost"],
                  wrong["agnhost"]);
  table += format(
      "\nIn brackets: the overhead over no webhook at the same percentile. With %d pods per "
      "variant, p99 is the %dth slowest of each: its overhead moves by several ms from run to "
      "run on a shared machine, p50 and p95 much less.\n",
      pods, std::max(1, pods / 100));
  std::printf("\npod creation through the API server\n%s\n", table.c_str());
  append("pods.md", table);

  const std::string section = "2";
  summaryRow("pod creation p50 / p95 / p99, no webhook",
             format("%.1f / %.1f / %.1f ms", p("none", 0.5), p("none", 0.95), p("none", 0.99)),
             section);
  summaryRow("our webhook's overhead on pod creation, p50 / p95 / p99",
             format("%+.1f / %+.1f / %+.1f ms (agnhost's: %+.1f / %+.1f / %+.1f ms)",
                    p("ours", 0.5) - p("none", 0.5), p("ours", 0.95) - p("none", 0.95),
                    p("ours", 0.99) - p("none", 0.99), p("agnhost", 0.5) - p("none", 0.5),
                    p("agnhost", 0.95) - p("none", 0.95), p("agnhost", 0.99) - p("none", 0.99)),
             section);
  for (const auto& variant : kVariants) {
    writeCdf("pods-" + variant, latencies[variant]);
    CHECK(failed[variant] == 0);
    CHECK(wrong[variant] == 0);
    CHECK(latencies[variant].size() == static_cast<size_t>(pods));
  }
  for (const auto& variant : {"ours", "agnhost"}) {
    (void)client->remove(resources::kMutatingWebhookConfigurations, "",
                         std::string("bench-") + variant);
  }
}
