// gvirtus-device-plugin as a black box: its flags, exit codes and messages, and its life
// from start to SIGTERM against a fake kubelet, with its health listener.
#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "device-plugin/dp_test_support.h"
#include "support/child_process.h"
#include "support/cluster_env.h"

using namespace std::chrono_literals;
using gvirtus::device_plugin::test::FakeKubelet;
using gvirtus::device_plugin::test::TempDir;
using gvirtus::testing::ChildProcess;
using gvirtus::testing::eventually;
using gvirtus::testing::freePort;
using gvirtus::testing::httpFetch;
using gvirtus::testing::metricValue;
using gvirtus::testing::runCommand;

namespace {

const std::string kPlugin = GVIRTUS_DEVICE_PLUGIN;

std::pair<int, std::string> runPlugin(std::vector<std::string> args) {
  args.insert(args.begin(), kPlugin);
  return runCommand(std::move(args), {}, 30s);
}

int lineCount(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("gvirtus-device-plugin --help and --version exit 0", "[device-plugin][binary]") {
  auto [code, output] = runPlugin({"--help"});
  CHECK(code == 0);
  for (const char* flag :
       {"--kubelet-dir", "--resource", "--devices", "--cdi", "--cdi-dir", "--socket-name",
        "--health-addr", "--kubeconfig", "--log-level", "--log-format", "--version"}) {
    CHECK_THAT(output, Catch::Contains(flag));
  }
  auto [versionCode, version] = runPlugin({"--version"});
  CHECK(versionCode == 0);
  CHECK(version == std::string("gvirtus-device-plugin ") + GVIRTUS_VERSION + "\n");
}

TEST_CASE("bad flags exit 2 with one line naming the flag", "[device-plugin][binary]") {
  TempDir dir;
  std::ofstream(dir.file("file")) << "";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--devices", "0"}, "--devices: "},
      {{"--devices", "100000"}, "--devices: "},
      {{"--devices", "two"}, "--devices: "},
      {{"--resource", "gpu"}, "--resource: "},
      {{"--resource", "kubernetes.io/gpu"}, "--resource: "},
      {{"--socket-name", "kubelet.sock"}, "--socket-name: "},
      {{"--cdi=sometimes"}, "--cdi: "},
      {{"--log-level", "loud"}, "--log-level: "},
      {{"--no-such-flag"}, "--no-such-flag: "},
      {{"--kubelet-dir", "/nonexistent/device-plugins"}, "--kubelet-dir: "},
      {{"--kubelet-dir", dir.path().string(), "--cdi-dir", dir.file("file/cdi").string(),
        "--health-addr", ""},
       "--cdi-dir: "},
      {{"--kubelet-dir", dir.path().string(), "--cdi=false", "--health-addr", "nonsense"},
       "--health-addr: "},
  };
  for (const auto& [args, prefix] : cases) {
    INFO(args.front() << " " << (args.size() > 1 ? args[1] : ""));
    auto [code, output] = runPlugin(args);
    CHECK(code == 2);
    CHECK_THAT(output, Catch::StartsWith("gvirtus-device-plugin: " + prefix));
    CHECK(lineCount(output) == 1);
  }
}

TEST_CASE("gvirtus-device-plugin registers, reports readiness, and stops cleanly on SIGTERM",
          "[device-plugin][binary]") {
  TempDir dir;
  const auto kubeletDir = dir.file("device-plugins");
  const auto cdiDir = dir.file("cdi");
  std::filesystem::create_directory(kubeletDir);
  const int healthPort = freePort();
  ChildProcess plugin({kPlugin, "--kubelet-dir", kubeletDir.string(), "--cdi-dir", cdiDir.string(),
                       "--devices", "3", "--resource", "example.com/vgpu", "--health-addr",
                       "127.0.0.1:" + std::to_string(healthPort)},
                      {}, dir.file("plugin.log").string());
  INFO(plugin.output());
  const auto ourSocket = kubeletDir / "gvirtus-vgpu.sock";

  // Serving, but not ready until the kubelet has it.
  REQUIRE(eventually([&] { return std::filesystem::exists(ourSocket); }, 10s));
  REQUIRE(eventually([&] { return httpFetch(healthPort, "/healthz").status == 200; }, 10s));
  CHECK(httpFetch(healthPort, "/readyz").status == 503);
  CHECK(std::filesystem::exists(cdiDir / "gvirtus.io-vgpu.json"));

  auto kubelet = std::make_unique<FakeKubelet>(kubeletDir);
  auto request = kubelet->awaitRequest(1, 5s);
  REQUIRE(request.has_value());
  CHECK(request->resource_name() == "example.com/vgpu");
  CHECK(request->endpoint() == "gvirtus-vgpu.sock");
  CHECK(eventually([&] { return httpFetch(healthPort, "/readyz").status == 200; }, 5s));
  const std::string metrics = httpFetch(healthPort, "/metrics").body;
  CHECK(metricValue(metrics, "gvirtus_device_plugin_devices") == 3);
  CHECK(metricValue(metrics, "gvirtus_device_plugin_registered") == 1);
  CHECK(metricValue(metrics, "gvirtus_device_plugin_registrations_total") == 1);

  // The kubelet goes away: not ready any more.
  kubelet.reset();
  CHECK(eventually([&] { return httpFetch(healthPort, "/readyz").status == 503; }, 5s));

  plugin.kill(SIGTERM);
  auto code = plugin.wait(10s);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK_FALSE(std::filesystem::exists(ourSocket));
  CHECK(std::filesystem::exists(cdiDir / "gvirtus.io-vgpu.json"));
}
