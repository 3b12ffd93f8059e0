// Labeler scale benchmark (issue 4): 1,000 fake nodes created at once against the real
// control plane, one gvirtus-labeler --all-nodes labelling them. Prints the time from a
// node's creation to its labels (p50, p99), requests per node and the labeler's memory.
//
//   tests/cluster/with-cluster.sh bench-labeler build/tests/labeler_bench   (BENCH_NODES,
//   BENCH_QPS, default 400; BENCH_WORKERS, default 16: with both the labeler keeps up with
//   the creation)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/bench_output.h"
#include "common/cache/resource_cache.h"
#include "support/cluster_env.h"

using namespace gvirtus;
using namespace gvirtus::testing;
using Stopwatch = std::chrono::steady_clock;

namespace {

double percentile(std::vector<double> values, double p) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(p * values.size()));
  return values[index];
}

bool labelled(const nlohmann::json& node) {
  const auto labels = node["metadata"].value("labels", nlohmann::json::object());
  return labels.contains("gvirtus.io/frontend.allowed") &&
         labels.contains("gvirtus.io/backend.allowed");
}

}  // namespace

TEST_CASE("labeler benchmark: 1,000 nodes created at once", "[bench]") {
  const int nodes = std::getenv("BENCH_NODES") ? std::atoi(std::getenv("BENCH_NODES")) : 1000;
  const std::string qps = std::getenv("BENCH_QPS") ? std::getenv("BENCH_QPS") : "400";
  const std::string workers = std::getenv("BENCH_WORKERS") ? std::getenv("BENCH_WORKERS") : "16";
  auto client = adminClient();
  const int port = freePort();
  ChildProcess labeler({binDir() + "/gvirtus-labeler", "--kubeconfig", kubeconfigPath(),
                        "--all-nodes", "--workers", workers, "--kube-api-qps", qps,
                        "--kube-api-burst", qps, "--health-addr",
                        "127.0.0.1:" + std::to_string(port)});
  REQUIRE(eventually([&] { return httpGet(port, "/readyz") == "ok\n"; }));
  const std::string idleMetrics = httpGet(port, "/metrics");

  std::mutex mutex;
  std::map<std::string, Stopwatch::time_point> created;
  std::map<std::string, Stopwatch::time_point> done;
  ResourceCache watch(*client, resources::kNodes, "", "bench=labeler");
  auto observe = [&](const nlohmann::json& node) {
    if (!labelled(node)) {
      return;
    }
    std::lock_guard lock(mutex);
    done.emplace(node["metadata"]["name"].get<std::string>(), Stopwatch::now());
  };
  watch.addHandlers(
      {.onAdd = observe,
       .onUpdate = [&](const nlohmann::json&, const nlohmann::json& now) { observe(now); },
       .onDelete = {}});
  watch.start();
  REQUIRE(watch.waitForSync(std::chrono::seconds(30)));

  const auto start = Stopwatch::now();
  std::atomic<int> next{0};
  std::vector<std::jthread> creators;
  for (int t = 0; t < 16; ++t) {
    creators.emplace_back([&] {
      for (int i = next++; i < nodes; i = next++) {
        const std::string name = "bench-node-" + std::to_string(i);
        nlohmann::json node = {{"apiVersion", "v1"},
                               {"kind", "Node"},
                               {"metadata", {{"name", name}, {"labels", {{"bench", "labeler"}}}}}};
        const auto sent = Stopwatch::now();
        if (client->create(resources::kNodes, "", node)) {
          std::lock_guard lock(mutex);
          created.emplace(name, sent);
        }
      }
    });
  }
  creators.clear();
  const double createSeconds = std::chrono::duration<double>(Stopwatch::now() - start).count();
  REQUIRE(eventually(
      [&] {
        std::lock_guard lock(mutex);
        return done.size() >= created.size();
      },
      std::chrono::minutes(5)));
  const double totalSeconds = std::chrono::duration<double>(Stopwatch::now() - start).count();

  std::vector<double> latencies;
  {
    std::lock_guard lock(mutex);
    for (const auto& [name, at] : created) {
      latencies.push_back(std::chrono::duration<double, std::milli>(done[name] - at).count());
    }
  }
  // The labeler counts a PATCH when its answer is back, which can be after this watch saw
  // the node labelled: wait (briefly) for the count to catch up before reading it.
  std::string metrics;
  double patches = 0;
  (void)gvirtus::testing::eventually(
      [&] {
        metrics = httpGet(port, "/metrics");
        patches = metricValue(metrics, "gvirtus_labeler_patches_total");
        return patches >= static_cast<double>(created.size());
      },
      std::chrono::seconds(5));
  const double reconciles = metricValue(metrics, "gvirtus_labeler_reconciles_total");
  const double rss = metricValue(metrics, "process_resident_memory_bytes");
  const double idleRss = metricValue(idleMetrics, "process_resident_memory_bytes");
  std::printf(
      "\nlabeler benchmark (%zu nodes created at once by 16 clients in %.1fs; labeler "
      "--all-nodes --workers %s --kube-api-qps %s)\n",
      created.size(), createSeconds, workers.c_str(), qps.c_str());
  std::printf("  creation to labelled: p50 %.0f ms, p99 %.0f ms, all done in %.1f s\n",
              percentile(latencies, 0.50), percentile(latencies, 0.99), totalSeconds);
  std::printf(
      "  PATCH requests per node: %.3f; reconciles per node: %.2f "
      "(plus 1 paged LIST and 1 WATCH for the whole run)\n",
      patches / static_cast<double>(created.size()),
      reconciles / static_cast<double>(created.size()));
  std::printf("  labeler resident memory: %.1f MiB idle, %.1f MiB with %zu nodes cached\n",
              idleRss / 1048576.0, rss / 1048576.0, created.size());
  const double p50 = percentile(latencies, 0.50);
  const double p99 = percentile(latencies, 0.99);
  bench::append(
      "labeler.md",
      bench::format(
          "%zu nodes created at once by 16 clients (%.1f s) against the local control plane; "
          "one `gvirtus-labeler --all-nodes --workers %s --kube-api-qps %s` labels them.\n\n"
          "| | |\n|---|---|\n"
          "| node created → labelled, p50 / p99 | %.0f / %.0f ms |\n"
          "| all labelled after | %.1f s |\n"
          "| PATCH requests per node | %.3f |\n"
          "| reconciles per node | %.2f |\n"
          "| other requests | 1 paged LIST and 1 WATCH for the whole run |\n"
          "| resident memory: idle / %zu nodes cached | %.1f / %.1f MiB |\n",
          created.size(), createSeconds, workers.c_str(), qps.c_str(), p50, p99, totalSeconds,
          patches / static_cast<double>(created.size()),
          reconciles / static_cast<double>(created.size()), created.size(), idleRss / 1048576.0,
          rss / 1048576.0));
  const std::string section = "4";
  bench::summaryRow(
      bench::format("%zu fake nodes labelled: all done after", created.size()),
      bench::format("%.1f s (p50 %.0f ms, p99 %.0f ms per node; %.2f PATCH per node)", totalSeconds,
                    p50, p99, patches / static_cast<double>(created.size())),
      section);
  bench::memoryRow("gvirtus-labeler (--all-nodes)", idleRss, rss,
                   bench::format("%zu nodes created at once, cached and labelled", created.size()));
  CHECK(patches == static_cast<double>(created.size()));
  watch.stop();
}
