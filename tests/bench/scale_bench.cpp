// The webhook at cluster scale, on the real control plane with kwok nodes (issue: 5,000
// nodes, 50,000 GVirtuS pods, 10,000 waiting). Two replicas with leader election, as the
// Deployment runs them, registered by URL (tests/webhook/cluster_fixtures.h).
//
//   1. Nodes: BENCH_NODES in all, of which BENCH_FRONTENDS frontends (with nvidia.com/gpu
//      capacity) and BENCH_GPU_NODES GPU nodes, each with one backend pod whose load report
//      gives room for BENCH_PODS / BENCH_GPU_NODES sessions.
//   2. BENCH_PODS GVirtuS pods bound to the frontends: BENCH_ADMITTED of them created through
//      the webhook (every one gets a backend), the rest copies of those as admitted, created
//      where the registration does not reach. Then each backend reports its sessions full.
//      kwok leaves these pods' status alone, so they have no address
//      (tests/bench/scale-cluster.yaml).
//   3. A second replica starts with every pod to list: time to ready, memory per cached pod.
//   4. Admission latency at BENCH_RATE reviews/s on the leader while everything is cached.
//   5. BENCH_WAITING pods created while no backend has room: all wait. Then backends that
//      ran full since step 1 report room for all of them, and the leader releases them,
//      under the same admission load: time to release, API writes per pod, against what
//      --kube-api-qps allows. (Started only then, they waited minutes for kwok to run them
//      among 60,000 pods: the release measured kwok.)
//
//   tests/cluster/with-cluster.sh bench-scale build/tests/scale_bench   (or make bench-scale)
//   (BENCH_NODES 5000, BENCH_FRONTENDS 1000, BENCH_GPU_NODES 200, BENCH_PODS 50000,
//   BENCH_ADMITTED 5000, BENCH_WAITING 10000, BENCH_RATE 100, BENCH_QPS 200: the webhook's
//   --kube-api-qps; BENCH_PERF=perf adds perf's profile of the admitting replica while it
//   admits, of a new replica until it is ready and of the leader during the release,
//   tests/bench/perf_profile.h)

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "bench/api_ceiling.h"
#include "bench/bench_env.h"
#include "bench/bench_output.h"
#include "bench/cluster_bench.h"
#include "bench/cpu_profile.h"
#include "bench/load_generator.h"
#include "bench/perf_profile.h"
#include "bench/process_stats.h"
#include "common/cache/resource_cache.h"
#include "webhook/cluster_fixtures.h"
#include "webhook/fixtures.h"

using namespace gvirtus;
using namespace gvirtus::bench;
using gvirtus::testing::eventually;
using gvirtus::testing::httpGet;
using gvirtus::testing::metricValue;
using gvirtus::webhook::testing::backendPod;
using gvirtus::webhook::testing::ElectedWebhooks;
using gvirtus::webhook::testing::WebhookProcess;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr const char* kNamespace = "bench-scale";
// Left out of the webhook's registration: step 2's copies of admitted pods.
constexpr const char* kCopiesNamespace = "bench-scale-copies";
constexpr const char* kBackendNamespace = "gvirtus-system";
constexpr const char* kRunLabel = "bench.gvirtus.io/run";
// The leader's writers of a release (webhook/release/controller.h, parallelReleases).
constexpr int kReleaseWriters = 8;

double seconds(bench::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::string frontendName(int i) {
  return "fe-" + std::to_string(i);
}

json node(const std::string& name, const json& labels, const json& extraCapacity) {
  json capacity = {{"cpu", "64"}, {"memory", "256Gi"}, {"pods", "110"}};
  capacity.update(extraCapacity);
  json all = labels;
  all["kubernetes.io/hostname"] = name;
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", all}}},
          {"status", {{"capacity", capacity}, {"allocatable", capacity}}}};
}

json gvirtusPod(const std::string& name, const std::string& run, const std::string& nodeName) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", name},
                {"namespace", kNamespace},
                {"labels", {{"gvirtus.io/enabled", "true"}, {kRunLabel, run}}}}},
              {"spec",
               {{"containers", json::array({{{"name", "app"},
                                             {"image", "example/app"},
                                             {"command", {"python", "train.py"}}}})}}}};
  if (!nodeName.empty()) {
    pod["spec"]["nodeName"] = nodeName;
  }
  return pod;
}

// The same pod without gvirtus.io/enabled: the API server admits it without our webhook.
json plainPod(const std::string& name, const std::string& nodeName) {
  json pod = gvirtusPod(name, "plain", nodeName);
  pod["metadata"]["labels"].erase("gvirtus.io/enabled");
  return pod;
}

// Running pod `index`: `admitted` as the webhook admitted it (its backend, its wiring, its
// frontend), under a name of its own.
json admittedCopy(const json& admitted, int index) {
  json copy = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"spec", admitted["spec"]}};
  copy["metadata"] = {{"name", "run-" + std::to_string(index)},
                      {"namespace", kCopiesNamespace},
                      {"labels", admitted["metadata"]["labels"]},
                      {"annotations", admitted["metadata"]["annotations"]}};
  return copy;
}

json backend(const std::string& name, int index, int sessions, int maxSessions) {
  json pod = backendPod(kBackendNamespace, name, "gpu-" + std::to_string(index), "bench", sessions,
                        maxSessions);
  pod["metadata"]["labels"][kRunLabel] = "backend";
  return pod;
}

// The webhook's latency figures under load, printed as "p50 / p99 us".
std::string latency(const LoadResult& result) {
  return format("%.0f / %.0f us (%ld failed)", percentile(result.latenciesUs, 0.5),
                percentile(result.latenciesUs, 0.99), result.failed);
}

// The backend shims' load reports: written again every 30 s, as a shim does (the chooser
// leaves out a backend whose report is older than 5 minutes, and the bench runs longer).
class LoadReports {
 public:
  LoadReports(KubeClient& client, int maxSessions) : client_(client), maxSessions_(maxSessions) {}

  // Backend pod `name`, on GPU node `index`, has `sessions` from now on; written at once
  // unless `written` (the pod was created with it).
  bool report(const std::string& name, int index, int sessions, bool written = false) {
    {
      std::lock_guard lock(mutex_);
      backends_[name] = {index, sessions};
    }
    return written || write(name, index, sessions);
  }

 private:
  bool write(const std::string& name, int index, int sessions) {
    json load = backend(name, index, sessions, maxSessions_);
    json patch = {{"metadata", {{"annotations", load["metadata"]["annotations"]}}}};
    return client_.patch(resources::kPods, kBackendNamespace, name, PatchType::Merge, patch.dump())
        .has_value();
  }
  void beat(std::stop_token stop) {
    std::mutex sleeping;
    std::condition_variable_any period;
    std::unique_lock lock(sleeping);
    while (!period.wait_for(lock, stop, 30s, [&] { return stop.stop_requested(); })) {
      std::map<std::string, std::pair<int, int>> now;
      {
        std::lock_guard guard(mutex_);
        now = backends_;
      }
      for (const auto& [name, state] : now) {
        (void)write(name, state.first, state.second);
      }
    }
  }

  KubeClient& client_;
  const int maxSessions_;
  std::mutex mutex_;
  std::map<std::string, std::pair<int, int>> backends_;  // name: (GPU node, sessions)
  std::jthread thread_{[this](std::stop_token stop) { beat(std::move(stop)); }};
};

}  // namespace

// What the webhook and the API server say about one step, read before and after it: the
// evidence beside a latency or a rate that misses its goal.
struct StepProfile {
  std::string webhook;  // the admitting replica's /metrics
  std::string leader;   // the leader's
  std::string api;      // the API server's
  CpuReading cpu;
};

StepProfile readProfile(const WebhookProcess& admitting, const WebhookProcess& leader) {
  return {httpGet(admitting.healthPort(), "/metrics"), httpGet(leader.healthPort(), "/metrics"),
          apiMetrics(), readCpu()};
}

std::string milliseconds(double seconds) {
  return std::isnan(seconds) ? std::string("none") : format("%.1f ms", seconds * 1000);
}

// Rows that say where a step's time went: inside the webhook's review handler, in the API
// server (its PATCH of pods, and the wait in its priority-and-fairness queues), and on the
// machine's cores.
std::string profileRows(const std::string& step, const StepProfile& before,
                        const StepProfile& after, const std::map<int, std::string>& names) {
  constexpr const char* kReview = "gvirtus_webhook_review_duration_seconds";
  const double reviews = seriesTotal(after.webhook, std::string(kReview) + "_count") -
                         seriesTotal(before.webhook, std::string(kReview) + "_count");
  std::string text = format(
      "| %s: admission inside the webhook (review body to body), p50 / p99 of %.0f | at most %s "
      "/ %s |\n",
      step.c_str(), reviews,
      milliseconds(quantileBetween(histogramBuckets(before.webhook, kReview),
                                   histogramBuckets(after.webhook, kReview), 0.5))
          .c_str(),
      milliseconds(quantileBetween(histogramBuckets(before.webhook, kReview),
                                   histogramBuckets(after.webhook, kReview), 0.99))
          .c_str());
  constexpr const char* kApi = "apiserver_request_duration_seconds";
  const std::vector<std::string> patchPods = {"verb=\"PATCH\"", "resource=\"pods\"",
                                              "subresource=\"\""};
  const double patches = seriesTotal(after.api, std::string(kApi) + "_count", patchPods) -
                         seriesTotal(before.api, std::string(kApi) + "_count", patchPods);
  const double patchSeconds = seriesTotal(after.api, std::string(kApi) + "_sum", patchPods) -
                              seriesTotal(before.api, std::string(kApi) + "_sum", patchPods);
  text += format(
      "| %s: API server time per PATCH of a pod, mean / p99 of %.0f | %s / at most %s |\n",
      step.c_str(), patches, milliseconds(patches > 0 ? patchSeconds / patches : NAN).c_str(),
      milliseconds(quantileBetween(histogramBuckets(before.api, kApi, patchPods),
                                   histogramBuckets(after.api, kApi, patchPods), 0.99))
          .c_str());
  constexpr const char* kQueued = "apiserver_flowcontrol_request_wait_duration_seconds";
  const double queued = seriesTotal(after.api, std::string(kQueued) + "_count") -
                        seriesTotal(before.api, std::string(kQueued) + "_count");
  const double queuedSeconds = seriesTotal(after.api, std::string(kQueued) + "_sum") -
                               seriesTotal(before.api, std::string(kQueued) + "_sum");
  const double rejected = seriesTotal(after.api, "apiserver_flowcontrol_rejected_requests_total") -
                          seriesTotal(before.api, "apiserver_flowcontrol_rejected_requests_total");
  text += format(
      "| %s: API server priority-and-fairness wait, mean of %.0f requests; rejected | %s; %.0f "
      "|\n",
      step.c_str(), queued, milliseconds(queued > 0 ? queuedSeconds / queued : NAN).c_str(),
      rejected);
  text +=
      format("| %s: API requests, the most frequent | %s |\n", step.c_str(),
             busiestRequests(apiRequests(before.api), apiRequests(after.api),
                             std::chrono::duration<double>(after.cpu.at - before.cpu.at).count(), 5)
                 .c_str());
  text += format("| %s: CPU, in cores | %s |\n", step.c_str(),
                 cpuProfile(before.cpu, after.cpu, 6, names).c_str());
  return text;
}

TEST_CASE("webhook at cluster scale: 50,000 cached pods, 10,000 released", "[bench]") {
  const int nodes = envInt("BENCH_NODES", 5000);
  const int frontends = envInt("BENCH_FRONTENDS", 1000);
  const int gpuNodes = envInt("BENCH_GPU_NODES", 200);
  const int pods = envInt("BENCH_PODS", 50000);
  const int admitted = std::min(pods, envInt("BENCH_ADMITTED", 5000));
  const int waiting = envInt("BENCH_WAITING", 10000);
  const int rate = envInt("BENCH_RATE", 100);
  const int qps = envInt("BENCH_QPS", 200);
  REQUIRE(frontends + gpuNodes <= nodes);
  REQUIRE(admitted > 0);
  const int perBackend = (pods + gpuNodes - 1) / gpuNodes;
  const int newBackends = (waiting + perBackend - 1) / perBackend;
  // Sessions per backend, with room to spare: a review whose pod was not created after all
  // still holds its reservation for a while, and no pod must wait for it.
  const int maxSessions = perBackend + perBackend / 10 + 1;
  const std::string section = "6";
  std::string text;
  const auto benchStart = bench::Clock::now();
  auto say = [&](const char* what) {
    std::printf("[scale %5.0fs] %s\n", seconds(bench::Clock::now() - benchStart), what);
    std::fflush(stdout);
  };

  auto client = unthrottledClient();
  gvirtus::webhook::testing::ensureNamespace(*client, kNamespace);
  gvirtus::webhook::testing::ensureNamespace(*client, kBackendNamespace);
  gvirtus::webhook::testing::ensureNamespace(*client, kCopiesNamespace);

  // 1) Nodes and backends.
  auto start = bench::Clock::now();
  const int badNodes = parallelFor(nodes + newBackends, 16, [&](int i) {
    json made = i < frontends ? node(frontendName(i), {{"gvirtus.io/frontend.allowed", "true"}},
                                     {{"nvidia.com/gpu", "110"}})
                : i < frontends + gpuNodes + newBackends
                    ? node("gpu-" + std::to_string(i - frontends),
                           {{"gvirtus.io/backend.allowed", "true"}}, json::object())
                    : node("plain-" + std::to_string(i), json::object(), json::object());
    auto created = client->create(resources::kNodes, "", made);
    return created.has_value() || created.error().isConflict();
  });
  REQUIRE(badNodes == 0);
  LoadReports reports(*client, maxSessions);
  REQUIRE(
      parallelFor(gpuNodes, 16, [&](int b) {
        const std::string name = "backend-" + std::to_string(b);
        return client->create(resources::kPods, kBackendNamespace, backend(name, b, 0, maxSessions))
                   .has_value() &&
               reports.report(name, b, 0, true);
      }) == 0);
  // The backends that bring room in step 5, running from now on and full until then.
  REQUIRE(parallelFor(newBackends, 16, [&](int b) {
            const std::string name = "new-backend-" + std::to_string(b);
            return client
                       ->create(resources::kPods, kBackendNamespace,
                                backend(name, gpuNodes + b, maxSessions, maxSessions))
                       .has_value() &&
                   reports.report(name, gpuNodes + b, maxSessions, true);
          }) == 0);
  text += format("| %d nodes (%d frontends, %d GPU nodes) and %d backends created | %.1f s |\n",
                 nodes + newBackends, frontends, gpuNodes + newBackends, gpuNodes + newBackends,
                 seconds(bench::Clock::now() - start));
  say("nodes and backends created");

  ElectedWebhooks webhooks(
      *client, kBackendNamespace,
      {"--kube-api-qps", std::to_string(qps), "--kube-api-burst", std::to_string(2 * qps)},
      {"kube-system", kBackendNamespace, kCopiesNamespace});
  const std::string leaderId = webhooks.waitForLeader();
  WebhookProcess& leader = webhooks.process(leaderId);
  WebhookProcess& admitting = webhooks.registered();
  const int leaderPid = leader.child().pid();
  const int admittingPid = admitting.child().pid();
  REQUIRE(eventually(
      [&] { return leader.metric("gvirtus_webhook_backends_available") == gpuNodes + newBackends; },
      120s));
  const double idleRss = residentMemory(admittingPid).now;
  RssSampler admittingPeak(admittingPid);
  RssSampler leaderPeak(leaderPid);

  const std::map<int, std::string> names =
      leaderPid == admittingPid
          ? std::map<int, std::string>{{leaderPid, "webhook (leader, admitting)"}}
          : std::map<int, std::string>{{leaderPid, "webhook (leader)"},
                                       {admittingPid, "webhook (admitting)"}};

  // 2) The running pods, each on a frontend. The first `admitted` through the webhook: the
  // admission rate and CPU. The rest are copies of those as the webhook admitted them, in a
  // namespace the registration leaves out: the same pods in the webhook's caches, without
  // the 2-core test bed's time to admit them all (1,326 s for 50,000 at 8c3defc).
  const StepProfile create0 = readProfile(admitting, leader);
  std::string perfRows;
  PerfRecording admittingPerf(admittingPid, "admitting");
  start = bench::Clock::now();
  double cpu0 = cpuSeconds(admittingPid);
  std::vector<json> admittedPods(admitted);
  // Beside them, in the same seconds, plain pods at BENCH_PLAIN_RATE a second: the API
  // server's own latency for a pod create without our webhook (the floor ours is held to).
  LatencySamples gvirtusCreates;
  LatencySamples plainCreates;
  std::jthread plainLoad([&](std::stop_token stop) {
    const auto every = std::chrono::microseconds(1'000'000 / envInt("BENCH_PLAIN_RATE", 10));
    auto next = bench::Clock::now();
    for (int i = 0; !stop.stop_requested(); ++i) {
      const auto began = bench::Clock::now();
      if (client->create(resources::kPods, kNamespace,
                         plainPod("plain-" + std::to_string(i), frontendName(i % frontends)))) {
        plainCreates.add(bench::Clock::now() - began);
      }
      next += every;
      std::this_thread::sleep_until(next);
    }
  });
  const int notAdmitted = parallelFor(admitted, 16, [&](int i) {
    const auto began = bench::Clock::now();
    auto created = client->create(
        resources::kPods, kNamespace,
        gvirtusPod("run-" + std::to_string(i), "running", frontendName(i % frontends)));
    if (!created.has_value() || !released(*created)) {
      return false;
    }
    gvirtusCreates.add(bench::Clock::now() - began);
    admittedPods[i] = std::move(*created);
    return true;
  });
  plainLoad.request_stop();
  plainLoad.join();
  const double admitSeconds = seconds(bench::Clock::now() - start);
  const double admitCpu = cpuSeconds(admittingPid) - cpu0;
  const StepProfile create1 = readProfile(admitting, leader);
  perfRows += admittingPerf.report(format("admitting %d", admitted), "the admitting replica");
  REQUIRE(notAdmitted == 0);
  text += format(
      "| %d pods created through the webhook (16 clients), bound to the frontends | %.1f s (%.0f "
      "pods/s); %d not given a backend |\n",
      admitted, admitSeconds, admitted / admitSeconds, notAdmitted);
  text += format("| webhook CPU per 1,000 pods admitted | %.2f s |\n", admitCpu * 1000 / admitted);
  const double admissionOverhead = (gvirtusCreates.at(0.99) - plainCreates.at(0.99)) / 1000;
  text += format(
      "| pod create p50 / p99 at the client in those seconds: GVirtuS pods (%zu) / plain pods, "
      "no webhook (%zu) | %.1f / %.1f ms against %.1f / %.1f ms: p99 %+.1f ms (goal at most "
      "+2 ms) |\n",
      gvirtusCreates.size(), plainCreates.size(), gvirtusCreates.at(0.5) / 1000,
      gvirtusCreates.at(0.99) / 1000, plainCreates.at(0.5) / 1000, plainCreates.at(0.99) / 1000,
      admissionOverhead);
  start = bench::Clock::now();
  const int notCopied = parallelFor(pods - admitted, 16, [&](int i) {
    return client
        ->create(resources::kPods, kCopiesNamespace,
                 admittedCopy(admittedPods[i % admitted], admitted + i))
        .has_value();
  });
  REQUIRE(notCopied == 0);
  admittedPods.clear();
  text += format(
      "| %d more: copies of those as admitted, created without admission (the test bed's "
      "time, not the webhook's) | %.1f s |\n",
      pods - admitted, seconds(bench::Clock::now() - start));
  say("running pods created");
  // Every backend now reports its sessions full, as their frontends would have made them.
  REQUIRE(parallelFor(gpuNodes, 16, [&](int b) {
            return reports.report("backend-" + std::to_string(b), b, maxSessions);
          }) == 0);
  // Seen as full: a dry-run creation waits.
  WriteOptions dryRun;
  dryRun.dryRun = true;
  REQUIRE(eventually(
      [&] {
        auto probe =
            client->create(resources::kPods, kNamespace, gvirtusPod("probe", "probe", ""), dryRun);
        return probe.has_value() && gvirtus::webhook::testing::gated(*probe);
      },
      120s));
  REQUIRE(eventually(
      [&] { return admitting.metric("gvirtus_webhook_cached_gvirtus_pods") == pods; }, 120s));
  const double cachedRss = residentMemory(admittingPid).now;

  // 3) One more replica, started with every pod to list.
  const CpuReading start0 = readCpu();
  start = bench::Clock::now();
  auto third = webhooks.startAnother();
  const int thirdPid = third->child().pid();
  PerfRecording thirdPerf(thirdPid, "new-replica");
  REQUIRE(
      eventually([&] { return httpGet(third->healthPort(), "/readyz").starts_with("ok"); }, 300s));
  const double readySeconds = seconds(bench::Clock::now() - start);
  const double thirdCpu = cpuSeconds(thirdPid);
  const CpuReading start1 = readCpu();
  CHECK(third->metric("gvirtus_webhook_cached_gvirtus_pods") == pods);
  CHECK(third->metric("gvirtus_webhook_cached_nodes") == nodes + newBackends);
  const double thirdRss = residentMemory(thirdPid).now;
  perfRows += thirdPerf.report("a new replica's start", "the new replica");
  third.reset();
  text += format(
      "| a new replica started → ready, with %d GVirtuS pods to list; its CPU until then | %.1f "
      "s; %.1f s |\n",
      pods, readySeconds, thirdCpu);
  std::map<int, std::string> startNames = names;
  startNames[thirdPid] = "webhook (new replica)";
  const std::string startCpu = cpuProfile(start0, start1, 6, startNames);
  say("a new replica was ready");

  // 4) Admission latency with everything cached (every backend full: the pod would wait).
  const std::string review = gvirtus::webhook::testing::admissionReview(
                                 gvirtus::webhook::testing::gvirtusPod(), "uid-1", "CREATE", true)
                                 .dump();
  const LoadTarget target{[&] { return admitting.client(webhooks.caFile()); }, "/mutate", review};
  const StepProfile cached0 = readProfile(admitting, leader);
  const LoadResult cachedLoad = fixedRate(target, 4, rate, 10s);
  const StepProfile cached1 = readProfile(admitting, leader);
  text += format("| admission p50 / p99 at %d reviews/s, %d pods cached | %s |\n", rate, pods,
                 latency(cachedLoad).c_str());
  say("admission measured");

  // 5) Waiting pods, then room for them.
  std::mutex mutex;
  std::vector<double> releasedAfter;
  std::map<std::string, bool> seen;
  bench::Clock::time_point roomAt = bench::Clock::time_point::max();
  ResourceCache watch(*client, resources::kPods, kNamespace, std::string(kRunLabel) + "=waiting");
  auto observe = [&](const json& pod) {
    if (!released(pod)) {
      return;
    }
    std::lock_guard lock(mutex);
    if (seen.emplace(pod["metadata"]["name"].get<std::string>(), true).second) {
      releasedAfter.push_back(seconds(bench::Clock::now() - roomAt));
    }
  };
  watch.addHandlers({.onAdd = observe,
                     .onUpdate = [&](const json&, const json& now) { observe(now); },
                     .onDelete = {}});
  watch.start();
  REQUIRE(watch.waitForSync(60s));
  start = bench::Clock::now();
  cpu0 = cpuSeconds(admittingPid);
  const int notWaiting = parallelFor(waiting, 16, [&](int i) {
    auto created = client->create(resources::kPods, kNamespace,
                                  gvirtusPod("wait-" + std::to_string(i), "waiting", ""));
    return created.has_value() && gvirtus::webhook::testing::gated(*created);
  });
  const double waitCpu = cpuSeconds(admittingPid) - cpu0;
  CHECK(notWaiting == 0);
  REQUIRE(
      eventually([&] { return leader.metric("gvirtus_webhook_waiting_pods") == waiting; }, 300s));
  const double waitingRss = residentMemory(admittingPid).now;
  const double leaderWaitingRss = residentMemory(leaderPid).now;
  text += format(
      "| %d pods created while no backend has room: all wait | %.1f s; %d did not "
      "wait; webhook CPU per 1,000 %.2f s |\n",
      waiting, seconds(bench::Clock::now() - start), notWaiting, waitCpu * 1000 / waiting);
  say("waiting pods created");

  // The ceiling: the release's writes (a pod PATCH and an Event per pod) from a bare client
  // with the leader's writers and --kube-api-qps, over the running pods of step 2, right
  // before the release and against the same cluster.
  std::vector<std::pair<std::string, std::string>> ceilingPods;
  for (int i = 0; i < std::min(admitted, waiting); ++i) {
    ceilingPods.emplace_back(kNamespace, "run-" + std::to_string(i));
  }
  const WriteCeiling ceiling = releaseWriteCeiling(ceilingPods, kReleaseWriters, qps);
  CHECK(ceiling.failed == 0);
  text += format(
      "| the API server's ceiling for the release's writes: a bare client, %d writers, "
      "--kube-api-qps %d, a pod PATCH and an Event for each of %d pods | %.1f s (%.0f pods/s); "
      "%d failed |\n",
      kReleaseWriters, qps, ceiling.pods, ceiling.seconds, ceiling.podsPerSecond(), ceiling.failed);
  say("the API server's ceiling measured");

  const StepProfile release0 = readProfile(admitting, leader);
  const auto requests0 = apiRequests(release0.api);
  cpu0 = cpuSeconds(leaderPid);
  PerfRecording leaderPerf(leaderPid, "release-leader");
  {
    std::lock_guard lock(mutex);
    roomAt = bench::Clock::now();
  }
  REQUIRE(parallelFor(newBackends, 16, [&](int b) {
            return reports.report("new-backend-" + std::to_string(b), gpuNodes + b, 0);
          }) == 0);
  const LoadResult releaseLoad = fixedRate(target, 4, rate, 10s);
  const bool done = eventually(
      [&] {
        std::lock_guard lock(mutex);
        return releasedAfter.size() >= static_cast<size_t>(waiting);
      },
      std::chrono::minutes(10));
  const double releaseCpu = cpuSeconds(leaderPid) - cpu0;
  const StepProfile release1 = readProfile(admitting, leader);
  const auto requests1 = apiRequests(release1.api);
  perfRows += leaderPerf.report("the release", "the leader");
  CHECK(done);
  say("waiting pods released");

  double lastRelease = 0;
  {
    std::lock_guard lock(mutex);
    for (double at : releasedAfter) {
      lastRelease = std::max(lastRelease, at);
    }
  }
  const double n = waiting;
  const double writes = delta(requests0, requests1, "PATCH pods") +
                        delta(requests0, requests1, "POST events") +
                        delta(requests0, requests1, "PATCH events");
  const double perSecond = releasedAfter.size() / std::max(lastRelease, 1e-3);
  text += format(
      "| room for all → last of %d pods released | %.1f s (%.0f pods/s: %.0f%% of the %d "
      "requests/s of --kube-api-qps at 2 writes per pod)%s |\n",
      waiting, lastRelease, perSecond, 100 * perSecond / (qps / 2.0), qps,
      done ? "" : " **not all released within 10 minutes**");
  const double share = ceiling.podsPerSecond() > 0 ? perSecond / ceiling.podsPerSecond() : 0;
  text += format(
      "| the release against the API server's ceiling (same run) | %.0f%% (%.0f against %.0f "
      "pods/s; goal at least 90%%) |\n",
      100 * share, perSecond, ceiling.podsPerSecond());
  text +=
      format("| API writes per released pod (pod PATCH + Event POST/PATCH) | %.2f |\n", writes / n);
  text += format("| leader CPU per 1,000 pods released | %.2f s |\n", releaseCpu * 1000 / n);
  text += format("| admission p50 / p99 at %d reviews/s during the release | %s |\n", rate,
                 latency(releaseLoad).c_str());
  const double passes = seriesTotal(release1.leader, "gvirtus_webhook_release_passes_total") -
                        seriesTotal(release0.leader, "gvirtus_webhook_release_passes_total");
  text += format(
      "| looks of the leader's waiting-pod controller during the release (unit syncs and "
      "resyncs); pods released per look | %.0f; %.2f |\n",
      passes, passes > 0 ? n / passes : 0);
  text += profileRows(format("admitting %d", admitted), create0, create1, names);
  text += profileRows(format("%d cached", pods), cached0, cached1, names);
  text += format("| a new replica's start: CPU, in cores | %s |\n", startCpu.c_str());
  text += profileRows("the release", release0, release1, names);
  text += perfRows;
  text += format(
      "| admitting replica's resident memory: idle (%d nodes cached) / %d pods cached / and %d "
      "waiting / highest | %.1f / %.1f / %.1f / %.1f MiB |\n",
      nodes + newBackends, pods, waiting, idleRss / 1048576, cachedRss / 1048576,
      waitingRss / 1048576, admittingPeak.highest() / 1048576);
  text += format("| leader's resident memory: %d waiting / highest | %.1f / %.1f MiB |\n", waiting,
                 leaderWaitingRss / 1048576, leaderPeak.highest() / 1048576);
  text += format(
      "| memory per cached GVirtuS pod: a new replica (%.1f MiB) less an idle one, over %d pods "
      "| %.2f KiB |\n",
      thirdRss / 1048576, pods, (thirdRss - idleRss) / 1024 / pods);
  const std::string page = format(
      "%d kwok nodes, %d GVirtuS pods running on %d frontends across %d backends, then %d "
      "pods waiting until %d backends, full until then, report room. Two webhook replicas with "
      "leader "
      "election (--kube-api-qps %d); the API server sends reviews to one of them.\n\n"
      "| | |\n|---|---|\n%s",
      nodes + newBackends, pods, frontends, gpuNodes, waiting, newBackends, qps, text.c_str());
  std::printf("\nwebhook at scale\n%s\n", page.c_str());
  append("scale.md", page);
  summaryRow(format("memory per cached GVirtuS pod (%d cached)", pods),
             format("%.2f KiB", (thirdRss - idleRss) / 1024 / pods), section);
  summaryRow(format("%d waiting pods released at scale", waiting),
             format("%.1f s, %.0f%% of what --kube-api-qps allows", lastRelease,
                    100 * perSecond / (qps / 2.0)),
             section);
  summaryRow("release rate against the API server's ceiling for its writes, same run (goal >= 90%)",
             format("%.0f%% (%.0f / %.0f pods/s)", 100 * share, perSecond, ceiling.podsPerSecond()),
             section);
  summaryRow("pod create p99 at scale, ours less a plain pod's, same seconds (goal <= +2 ms)",
             format("%+.1f ms", admissionOverhead), section);
  watch.stop();
}
