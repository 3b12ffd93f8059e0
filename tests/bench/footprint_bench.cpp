// Resident memory of the two node agents not covered by the other benchmarks, idle and
// under load (the labeler's comes from labeler_bench, the webhook's from
// webhook_compare_bench and controller_bench):
//   gvirtus-device-plugin against a fake kubelet (tests/device-plugin/dp_test_support.h):
//     registered and idle, then a ListAndWatch stream open and Allocate calls from 4 clients
//     as fast as they are answered;
//   gvirtus-backend-shim over the fake GVirtuS backend and the fake NVML
//     (tests/backend-shim), publishing gvirtus.io/load on a pod of the local control plane
//     every second: idle, then with 256 client connections held open and /metrics scraped
//     ten times a second.
// VmRSS from /proc/PID/status of the agent itself (not of the backend it supervises).
//
//   tests/cluster/with-cluster.sh bench-agents build/tests/footprint_bench
//   (BENCH_SECONDS of load per agent, default 5)

#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend-shim/shim_test_support.h"
#include "bench/bench_env.h"
#include "bench/bench_output.h"
#include "bench/process_stats.h"
#include "device-plugin/dp_test_support.h"
#include "support/child_process.h"
#include "support/cluster_env.h"

using namespace gvirtus::bench;
using gvirtus::testing::ChildProcess;
using gvirtus::testing::eventually;
using gvirtus::testing::freePort;
using gvirtus::testing::metricValue;
using nlohmann::json;
using namespace std::chrono_literals;
namespace dp = gvirtus::device_plugin;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kSection = "3";

}  // namespace

TEST_CASE("footprint: gvirtus-device-plugin idle and under Allocate load", "[bench]") {
  const auto seconds = std::chrono::seconds(envInt("BENCH_SECONDS", 5));
  dp::test::TempDir dir;
  const auto kubeletDir = dir.file("device-plugins");
  std::filesystem::create_directory(kubeletDir);
  const int healthPort = freePort();
  ChildProcess plugin(
      {GVIRTUS_DEVICE_PLUGIN, "--kubelet-dir", kubeletDir.string(), "--cdi-dir",
       dir.file("cdi").string(), "--health-addr", "127.0.0.1:" + std::to_string(healthPort)},
      {}, dir.file("plugin.log").string());
  INFO(plugin.output());
  dp::test::FakeKubelet kubelet(kubeletDir);
  REQUIRE(kubelet.awaitRequest(1, 10s).has_value());
  REQUIRE(eventually(
      [&] { return gvirtus::testing::httpFetch(healthPort, "/readyz").status == 200; }, 10s));
  std::this_thread::sleep_for(1s);
  const double idle = residentMemory(plugin.pid()).now;

  const auto socket = kubeletDir / kubelet.awaitRequest(1)->endpoint();
  auto watcher = dp::test::pluginClient(socket);
  grpc::ClientContext watchContext;
  auto stream = watcher->ListAndWatch(&watchContext, v1beta1::Empty{});
  v1beta1::ListAndWatchResponse devices;
  REQUIRE(stream->Read(&devices));
  REQUIRE(devices.devices_size() > 0);

  RssSampler sampler(plugin.pid());
  std::atomic<long> allocations = 0;
  std::atomic<long> failures = 0;
  {
    const auto end = Clock::now() + seconds;
    std::vector<std::jthread> clients;
    for (int c = 0; c < 4; ++c) {
      clients.emplace_back([&, c] {
        auto client = dp::test::pluginClient(socket);
        long i = c;
        while (Clock::now() < end) {
          v1beta1::AllocateRequest request;
          request.add_container_requests()->add_devices_ids(
              devices.devices(static_cast<int>(i++ % devices.devices_size())).id());
          v1beta1::AllocateResponse response;
          (client->Allocate(dp::test::callContext().get(), request, &response).ok() ? allocations
                                                                                    : failures)++;
        }
      });
    }
  }
  const double loaded = std::max(sampler.highest(), residentMemory(plugin.pid()).now);
  watchContext.TryCancel();
  const double perSecond = static_cast<double>(allocations) / static_cast<double>(seconds.count());
  std::printf("\ngvirtus-device-plugin: %.1f MiB idle, %.1f MiB under load (%.0f Allocate/s)\n",
              idle / 1048576, loaded / 1048576, perSecond);
  memoryRow("gvirtus-device-plugin", idle, loaded,
            format("ListAndWatch open, Allocate from 4 clients (%.0f calls/s)", perSecond));
  summaryRow("device plugin Allocate calls answered per second (4 clients)",
             format("%.0f", perSecond), kSection);
  CHECK(failures == 0);
  plugin.kill(SIGTERM);
  CHECK(plugin.wait(10s) == std::optional<int>(0));
}

TEST_CASE("footprint: gvirtus-backend-shim idle and with 256 connections", "[bench]") {
  namespace shim = gvirtus::backend_shim::test;
  const auto seconds = std::chrono::seconds(envInt("BENCH_SECONDS", 5));
  auto client = gvirtus::testing::adminClient();
  const std::string ns = "default";
  const std::string podName = "bench-backend";
  const json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      // The session check is on, as deployed: the bench's clients connect from loopback.
      {"metadata",
       {{"name", podName},
        {"namespace", ns},
        {"annotations", {{"gvirtus.io/peers", "127.0.0.1"}}}}},
      {"spec",
       {{"schedulingGates", json::array({{{"name", "bench.gvirtus.io/hold"}}})},
        {"containers", json::array({{{"name", "backend"}, {"image", "gvirtus/backend"}}})}}}};
  (void)client->remove(gvirtus::resources::kPods, ns, podName);
  REQUIRE(eventually([&] { return client->create(gvirtus::resources::kPods, ns, pod).has_value(); },
                     30s));

  shim::TempDir dir;
  const int port = freePort();
  const int healthPort = freePort();
  const std::string marker = dir.file("starts.txt");
  std::unique_ptr<ChildProcess> process = std::make_unique<ChildProcess>(
      std::vector<std::string>{shim::kShimBinary,
                               "--kubeconfig",
                               gvirtus::testing::kubeconfigPath(),
                               "--port",
                               std::to_string(port),
                               "--health-addr",
                               "127.0.0.1:" + std::to_string(healthPort),
                               "--config-out",
                               dir.file("properties.json"),
                               "--max-sessions",
                               "512",
                               "--publish-interval",
                               "1s",
                               "--drain-timeout",
                               "1s",
                               "--nvml-library",
                               FAKE_NVML_LIBRARY,
                               "--",
                               shim::kFakeBackend,
                               "--marker",
                               marker},
      std::vector<std::string>{"POD_NAME=" + podName, "POD_NAMESPACE=" + ns, "GVIRTUS_HOME="},
      dir.file("shim.log"));
  struct BackendReaper {  // the fake backend runs in its own process group
    std::string marker;
    std::unique_ptr<ChildProcess>& shim;
    ~BackendReaper() {
      shim.reset();
      for (const auto& start : shim::readStarts(marker)) {
        ::kill(-start.pid, SIGKILL);
      }
    }
  } reaper{marker, process};
  INFO(process->output());
  REQUIRE(eventually(
      [&] { return gvirtus::testing::httpFetch(healthPort, "/readyz").status == 200; }, 20s));
  REQUIRE(eventually(
      [&] {
        auto current = client->get(gvirtus::resources::kPods, ns, podName);
        return current && (*current)["metadata"]
                              .value("annotations", json::object())
                              .contains("gvirtus.io/load");
      },
      20s));
  std::this_thread::sleep_for(2s);
  const double idle = residentMemory(process->pid()).now;

  RssSampler sampler(process->pid());
  {
    std::vector<std::unique_ptr<shim::TcpClient>> connections;
    for (int i = 0; i < 256; ++i) {
      connections.push_back(std::make_unique<shim::TcpClient>(port));
    }
    REQUIRE(eventually(
        [&] {
          return metricValue(gvirtus::testing::httpFetch(healthPort, "/metrics").body,
                             "gvirtus_backend_connections") == 256;
        },
        10s));
    const auto end = Clock::now() + seconds;
    while (Clock::now() < end) {
      (void)gvirtus::testing::httpGet(healthPort, "/metrics");
      std::this_thread::sleep_for(100ms);
    }
  }
  const double loaded = std::max(sampler.highest(), residentMemory(process->pid()).now);
  std::printf("gvirtus-backend-shim: %.1f MiB idle, %.1f MiB with 256 connections\n",
              idle / 1048576, loaded / 1048576);
  memoryRow("gvirtus-backend-shim", idle, loaded,
            "256 backend connections counted, /metrics 10/s, load published every 1 s");
  process->kill(SIGTERM);
  CHECK(process->wait(15s) == std::optional<int>(0));
  (void)client->remove(gvirtus::resources::kPods, ns, podName);
}
