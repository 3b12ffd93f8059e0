#pragma once

// The API server's ceiling for the webhook's own writes (issue 56): what a bare client gets,
// in the same run and against the same cluster, so that a release rate or an admission
// latency reads as a share of what the test bed allows, not as a figure of the test bed.

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_env.h"
#include "bench/cluster_bench.h"
#include "bench/percentile.h"
#include "common/controller/event_recorder.h"
#include "common/kube/access/config.h"
#include "common/kube/api/resource.h"
#include "common/kube/client.h"
#include "support/cluster_env.h"

namespace gvirtus::bench {

struct WriteCeiling {
  int pods = 0;
  int failed = 0;
  double seconds = 0;
  double podsPerSecond() const { return seconds > 0 ? (pods - failed) / seconds : 0; }
};

// The release's writes, from a bare client: for each pod of `pods` ("namespace", "name"),
// one JSON patch of the pod (an annotation added, as the release adds its own) and one
// Event about it, `writers` at a time (the leader's parallelReleases), through a client
// limited as the leader's is (--kube-api-qps QPS, --kube-api-burst 2 × QPS).
inline WriteCeiling releaseWriteCeiling(
    const std::vector<std::pair<std::string, std::string>>& pods, int writers, int qps) {
  auto config = loadKubeconfigFile(gvirtus::testing::kubeconfigPath());
  REQUIRE(config.has_value());
  KubeClientOptions options;
  options.qps = qps;
  options.burst = 2 * qps;
  auto client = KubeClient::create(*config, options);
  REQUIRE(client.has_value());
  EventRecorderOptions events;
  events.component = "gvirtus-bench-ceiling";
  WriteCeiling ceiling;
  ceiling.pods = static_cast<int>(pods.size());
  const auto start = std::chrono::steady_clock::now();
  ceiling.failed = parallelFor(ceiling.pods, writers, [&](int i) {
    const auto& [ns, name] = pods[i];
    const nlohmann::json patch =
        nlohmann::json::array({{{"op", "add"},
                                {"path", "/metadata/annotations/bench~1ceiling"},
                                {"value", std::to_string(i)}}});
    auto patched = (*client)->patch(resources::kPods, ns, name, PatchType::Json, patch.dump());
    if (!patched) {
      return false;
    }
    ObjectReference pod;
    pod.apiVersion = "v1";
    pod.kind = "Pod";
    pod.ns = ns;
    pod.name = name;
    return (*client)
        ->create(resources::kEvents, ns,
                 buildEvent(pod, EventType::Normal, "BenchCeiling", "the bare client's write",
                            events, std::chrono::system_clock::now()))
        .has_value();
  });
  ceiling.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return ceiling;
}

// Latencies in microseconds, added from several threads.
class LatencySamples {
 public:
  void add(std::chrono::steady_clock::duration took) {
    std::lock_guard lock(mutex_);
    samples_.push_back(microseconds(took));
  }
  // The p-quantile (0..1) in microseconds; 0 when none.
  double at(double p) {
    std::lock_guard lock(mutex_);
    return percentile(samples_, p);
  }
  size_t size() {
    std::lock_guard lock(mutex_);
    return samples_.size();
  }

 private:
  std::mutex mutex_;
  std::vector<double> samples_;
};

}  // namespace gvirtus::bench
