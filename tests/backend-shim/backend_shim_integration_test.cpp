// gvirtus-backend-shim as a host process against the real control plane: the load
// annotation appears on its pod and follows the backend's connections, and the peer check
// lets in the addresses its pod's gvirtus.io/peers lists.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "backend-shim/peer_guard_test_support.h"
#include "backend-shim/shim_test_support.h"
#include "common/kube/api/resource.h"
#include "common/kube/client.h"
#include "support/child_process.h"
#include "support/cluster_env.h"

using namespace std::chrono_literals;
namespace test = gvirtus::backend_shim::test;
using gvirtus::KubeClient;
using gvirtus::testing::ChildProcess;
using gvirtus::testing::eventually;
using gvirtus::testing::freePort;
namespace resources = gvirtus::resources;

namespace {

const std::string kNamespace = "default";
const std::string kNode = "gvirtus-shim-it-node";

// A kwok-managed node for the test pods, created once.
void ensureNode(KubeClient& client) {
  const nlohmann::json node = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", kNode},
        {"labels", {{"type", "kwok"}, {"kubernetes.io/hostname", kNode}}},
        {"annotations", {{"kwok.x-k8s.io/node", "fake"}}}}},
      {"spec",
       {{"taints",
         nlohmann::json::array(
             {{{"key", "kwok.x-k8s.io/node"}, {"value", "fake"}, {"effect", "NoSchedule"}}})}}}};
  auto created = client.create(resources::kNodes, "", node);
  if (!created) {
    REQUIRE(created.error().isConflict());
  }
}

// A backend pod whose peers (what the webhook would list) are `peers`: the test's clients
// connect from 127.0.0.1 unless they bind another loopback address.
nlohmann::json podObject(const std::string& name, const std::string& peers = "127.0.0.1") {
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"labels", {{"gvirtus.io/test", "backend-shim"}}},
        {"annotations", {{"gvirtus.io/peers", peers}}}}},
      {"spec",
       {{"nodeName", kNode},
        {"tolerations",
         nlohmann::json::array(
             {{{"key", "kwok.x-k8s.io/node"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}})},
        {"containers", nlohmann::json::array({{{"name", "backend-shim"},
                                               {"image", "gvirtus/backend-shim:test"}}})}}}};
}

std::string uniquePodName(const std::string& prefix) {
  return prefix + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 100000);
}

// The pod's gvirtus.io/load, parsed; null when absent or unreadable.
nlohmann::json podLoad(KubeClient& client, const std::string& name) {
  auto pod = client.get(resources::kPods, kNamespace, name);
  if (!pod) {
    return nullptr;
  }
  const auto& annotations = (*pod)["metadata"].value("annotations", nlohmann::json::object());
  if (!annotations.contains("gvirtus.io/load")) {
    return nullptr;
  }
  return nlohmann::json::parse(annotations["gvirtus.io/load"].get<std::string>(), nullptr, false);
}

// The shim over the fake backend and the fake NVML, publishing to pod `name` every second.
struct Shim {
  test::TempDir dir;
  int port = freePort();
  std::string marker = dir.file("starts.txt");
  std::unique_ptr<ChildProcess> process;

  int healthPort = freePort();

  // `flags` go after the shim's own, before the backend command.
  explicit Shim(const std::string& podName, const std::vector<std::string>& flags = {}) {
    std::vector<std::string> argv{test::kShimBinary,
                                  "--kubeconfig",
                                  gvirtus::testing::kubeconfigPath(),
                                  "--port",
                                  std::to_string(port),
                                  "--health-addr",
                                  "127.0.0.1:" + std::to_string(healthPort),
                                  "--config-out",
                                  dir.file("properties.json"),
                                  "--sessions=shared",
                                  "--max-sessions",
                                  "8",
                                  "--publish-interval",
                                  "1s",
                                  "--drain-timeout",
                                  "5s",
                                  "--nvml-library",
                                  FAKE_NVML_LIBRARY,
                                  "--log-level",
                                  "debug"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--", test::kFakeBackend, "--marker", marker});
    process = std::make_unique<ChildProcess>(
        argv,
        std::vector<std::string>{"POD_NAME=" + podName, "POD_NAMESPACE=" + kNamespace,
                                 "GVIRTUS_HOME="},
        dir.file("shim.log"));
  }
  std::string metrics() const { return gvirtus::testing::httpFetch(healthPort, "/metrics").body; }
  bool metric(const std::string& line) const {
    return metrics().find("\n" + line + "\n") != std::string::npos;
  }
  bool logged(const std::string& text) const {
    return process->output().find(text) != std::string::npos;
  }
  ~Shim() {
    process.reset();
    for (const auto& start : test::readStarts(marker)) {
      ::kill(-start.pid, SIGKILL);
    }
  }
};

struct PodCleanup {
  KubeClient& client;
  std::string name;
  ~PodCleanup() { (void)client.remove(resources::kPods, kNamespace, name); }
};

}  // namespace

TEST_CASE("backend-shim integration: the load annotation follows the connections",
          "[integration][backend_shim]") {
  auto client = gvirtus::testing::adminClient();
  ensureNode(*client);
  const std::string name = uniquePodName("shim-load");
  REQUIRE(client->create(resources::kPods, kNamespace, podObject(name)).has_value());
  PodCleanup cleanup{*client, name};

  Shim shim(name);
  nlohmann::json load;
  REQUIRE(eventually(
      [&] {
        load = podLoad(*client, name);
        return load.is_object() && load.value("connections", -1) == 0;
      },
      30s));
  INFO(load.dump());
  CHECK(load["maxSessions"] == 8);
  REQUIRE(load["gpus"].size() == 2);
  CHECK(load["gpus"][0] ==
        nlohmann::json::parse(R"({"index":0,"memoryTotalMiB":81920,"memoryUsedMiB":1024,)"
                              R"("utilization":12,"model":"Fake GPU 80GB",)"
                              R"("uuid":"GPU-00000000-0000-0000-0000-000000000000"})"));
  CHECK(load["updated"].get<std::string>().size() == 20);  // 2026-11-22T10:00:00Z
  CHECK(load["updated"].get<std::string>().back() == 'Z');

  // The first report can come before the backend listens (a connection was refused here
  // on a busy machine): ready says it listens.
  REQUIRE(eventually(
      [&] { return gvirtus::testing::httpFetch(shim.healthPort, "/readyz").status == 200; }, 30s));
  std::vector<std::unique_ptr<test::TcpClient>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<test::TcpClient>(shim.port));
  }
  CHECK(eventually(
      [&] {
        load = podLoad(*client, name);
        return load.is_object() && load.value("connections", -1) == 3;
      },
      20s));

  // Steady numbers are not written again, whatever the time: two more looks of the shim (a
  // --publish-interval apart) found them current and left them.
  const std::string updated = load["updated"];
  auto looks = [&] {
    const std::string output = shim.process->output();
    size_t count = 0;
    for (size_t at = output.find("load unchanged; not written again"); at != std::string::npos;
         at = output.find("load unchanged; not written again", at + 1)) {
      ++count;
    }
    return count;
  };
  const size_t looksBefore = looks();
  REQUIRE(eventually([&] { return looks() >= looksBefore + 2; }, 20s));
  CHECK(podLoad(*client, name)["updated"] == updated);

  clients.resize(1);
  CHECK(eventually(
      [&] {
        load = podLoad(*client, name);
        return load.is_object() && load.value("connections", -1) == 1;
      },
      20s));

  const auto starts = test::readStarts(shim.marker);
  REQUIRE_FALSE(starts.empty());
  const pid_t backend = starts.back().pid;
  shim.process->kill(SIGTERM);
  // Draining: not ready at once, still running while a client is connected (the drain
  // timeout is 5 s), the backend still serving it.
  CHECK(eventually(
      [&] { return gvirtus::testing::httpFetch(shim.healthPort, "/readyz").status == 503; }, 2s));
  // The drain has looked, found the client and waits on it (its debug line).
  CHECK(eventually(
      [&] {
        return shim.process->output().find("clients still connected connections=1") !=
               std::string::npos;
      },
      10s));
  CHECK(shim.process->running());
  CHECK(test::processAlive(backend));
  // The last client leaves: the shim stops the backend's group and exits 0.
  clients.clear();
  const auto code = shim.process->wait(4s);
  INFO(shim.process->output());
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK_FALSE(test::processAlive(backend));
  CHECK_THAT(shim.process->output(), Catch::Contains("no connection left"));
}

TEST_CASE("backend-shim integration: API errors are retried, never fatal",
          "[integration][backend_shim]") {
  auto client = gvirtus::testing::adminClient();
  ensureNode(*client);
  const std::string name = uniquePodName("shim-late");
  // The shim starts before its pod exists: every write fails (404) until it does.
  Shim shim(name);
  REQUIRE(eventually(
      [&] {
        return shim.process->output().find("cannot publish the load annotation") !=
               std::string::npos;
      },
      30s));
  CHECK(shim.process->running());

  REQUIRE(client->create(resources::kPods, kNamespace, podObject(name)).has_value());
  PodCleanup cleanup{*client, name};
  nlohmann::json load;
  CHECK(eventually(
      [&] {
        load = podLoad(*client, name);
        return load.is_object() && load.value("connections", -1) == 0;
      },
      30s));
  CHECK(shim.process->running());
  shim.process->kill(SIGTERM);
  CHECK(shim.process->wait(20s) == std::optional<int>(0));
}

TEST_CASE("backend-shim integration: sessions only from the addresses gvirtus.io/peers lists",
          "[integration][backend_shim]") {
  auto client = gvirtus::testing::adminClient();
  ensureNode(*client);
  const std::string name = uniquePodName("shim-peers");
  REQUIRE(client->create(resources::kPods, kNamespace, podObject(name, "127.0.0.2")).has_value());
  PodCleanup cleanup{*client, name};

  Shim shim(name, {"--peer-wait", "3s"});
  INFO(shim.process->output());
  REQUIRE(eventually([&] { return shim.metric("gvirtus_backend_peers 1"); }, 30s));
  REQUIRE(eventually(
      [&] { return gvirtus::testing::httpFetch(shim.healthPort, "/readyz").status == 200; }, 30s));

  test::LoopbackClient listed(shim.port, "127.0.0.2");
  REQUIRE(eventually([&] { return shim.metric("gvirtus_backend_sessions_allowed_total 1"); }, 10s));
  CHECK_FALSE(listed.closedWithin(std::chrono::milliseconds(0)));

  test::LoopbackClient stranger(shim.port, "127.0.0.3");
  stranger.send("hello");
  CHECK(stranger.closedWithin(15s));
  CHECK(eventually([&] { return shim.metric("gvirtus_backend_sessions_refused_total 1"); }, 5s));

  // The webhook lists a new pod a moment after it got its address: its session waits for it.
  test::LoopbackClient early(shim.port, "127.0.0.4");
  REQUIRE(eventually(
      [&] { return shim.logged("waiting for the peer list to hold the address peer=127.0.0.4"); },
      10s));
  REQUIRE(client
              ->patch(resources::kPods, kNamespace, name, gvirtus::PatchType::Merge,
                      R"({"metadata":{"annotations":{"gvirtus.io/peers":"127.0.0.2,127.0.0.4"}}})")
              .has_value());
  CHECK(eventually([&] { return shim.metric("gvirtus_backend_sessions_allowed_total 2"); }, 10s));
  CHECK_FALSE(early.closedWithin(std::chrono::milliseconds(0)));

  shim.process->kill(SIGTERM);
  CHECK(shim.process->wait(20s) == std::optional<int>(0));
}
