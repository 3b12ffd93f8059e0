// gvirtus-backend-shim as a black box: its flags, its exit codes and messages, and its life
// from start to SIGTERM with the fake backend and real TCP clients.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>

#include "backend-shim/fake_pod_api.h"
#include "backend-shim/peer_guard_test_support.h"
#include "backend-shim/running_shim.h"
#include "backend-shim/shim_test_support.h"
#include "support/child_process.h"
#include "support/cluster_env.h"

using namespace std::chrono_literals;
namespace test = gvirtus::backend_shim::test;
using gvirtus::testing::ChildProcess;
using gvirtus::testing::eventually;
using gvirtus::testing::freePort;
using gvirtus::testing::runCommand;

namespace {

std::pair<int, std::string> runShim(std::vector<std::string> args,
                                    std::vector<std::string> env = test::kShimEnv) {
  args.insert(args.begin(), test::kShimBinary);
  return runCommand(std::move(args), std::move(env), 30s);
}

int lineCount(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("backend-shim binary: --help and --version exit 0", "[shim_binary]") {
  auto [helpCode, help] = runShim({"--help"});
  CHECK(helpCode == 0);
  CHECK_THAT(help, Catch::StartsWith("Usage: gvirtus-backend-shim"));
  for (const char* flag : {"--port", "--plugins", "--config-out", "--max-sessions",
                           "--publish-interval", "--drain-timeout", "--gvirtus-home",
                           "--kubeconfig", "--log-level", "--log-format", "--health-addr"}) {
    CHECK_THAT(help, Catch::Contains(flag));
  }
  auto [versionCode, version] = runShim({"--version"});
  CHECK(versionCode == 0);
  CHECK_THAT(version, Catch::StartsWith("gvirtus-backend-shim "));
}

TEST_CASE("backend-shim binary: a bad flag exits 2 with one line naming it", "[shim_binary]") {
  auto [code, out] = runShim({"--bogus"});
  CHECK(code == 2);
  CHECK(out == "gvirtus-backend-shim: --bogus: unknown flag (see --help)\n");

  std::tie(code, out) = runShim({"--port", "70000", "--", test::kFakeBackend});
  CHECK(code == 2);
  CHECK(lineCount(out) == 1);
  CHECK_THAT(out, Catch::StartsWith("gvirtus-backend-shim: --port: "));

  std::tie(code, out) = runShim({"--drain-timeout", "5", "--", test::kFakeBackend});
  CHECK(code == 2);
  CHECK_THAT(out, Catch::StartsWith("gvirtus-backend-shim: --drain-timeout: "));

  std::tie(code, out) = runShim({"--log-format", "xml", "--", test::kFakeBackend});
  CHECK(code == 2);
  CHECK_THAT(out, Catch::StartsWith("gvirtus-backend-shim: --log-format: "));
}

TEST_CASE("backend-shim binary: a config path not ending in .json exits 2", "[shim_binary]") {
  auto [code, out] = runShim({"--config-out", "/tmp/properties.yaml", "--", test::kFakeBackend});
  CHECK(code == 2);
  CHECK(lineCount(out) == 1);
  CHECK(out ==
        "gvirtus-backend-shim: --config-out: must be a file name ending in .json (gvirtus-backend "
        "takes no other), got \"/tmp/properties.yaml\"\n");
}

TEST_CASE("backend-shim binary: no backend binary exits 2", "[shim_binary]") {
  auto [code, out] = runShim({});
  CHECK(code == 2);
  CHECK(out ==
        "gvirtus-backend-shim: no backend binary: set --gvirtus-home (or $GVIRTUS_HOME) or give "
        "the backend command after --\n");

  std::tie(code, out) = runShim({}, {"POD_NAME=", "GVIRTUS_HOME=/no/such/gvirtus"});
  CHECK(code == 2);
  CHECK(out ==
        "gvirtus-backend-shim: --gvirtus-home: no backend binary: "
        "/no/such/gvirtus/bin/gvirtus-backend is not an executable file\n");

  std::tie(code, out) = runShim({"--", "/no/such/gvirtus-backend"});
  CHECK(code == 2);
  CHECK(lineCount(out) == 1);
  CHECK_THAT(out, Catch::Contains("no backend binary"));
}

TEST_CASE("backend-shim binary: a port in use at start exits 2 and starts nothing",
          "[shim_binary]") {
  test::TempDir dir;
  const int port = freePort();
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  const std::string marker = dir.file("starts.txt");
  auto [code, out] =
      runShim({"--port", std::to_string(port), "--config-out", dir.file("p.json"), "--health-addr",
               "", "--peer-check=false", "--", test::kFakeBackend, "--marker", marker});
  ::close(listener);
  CHECK(code == 2);
  CHECK(out == "gvirtus-backend-shim: --port: " + std::to_string(port) +
                   " is already in use (a socket listens on it)\n");
  CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("backend-shim binary: ready, measured, and on SIGTERM drained then stopped with exit 0",
          "[shim_binary]") {
  test::RunningShim shim;
  shim.start({"--drain-timeout", "20s", "--log-level", "debug"});
  REQUIRE(eventually([&] { return shim.readyz() == 200; }, 15s));
  const pid_t backend = shim.backendPid();
  REQUIRE(backend > 0);
  // The config was rendered where asked, and the backend got its path last.
  CHECK(std::filesystem::exists(shim.dir.file("etc/properties.json")));
  // The metrics follow within a second.
  CHECK(eventually([&] { return shim.metric("gvirtus_backend_up 1"); }, 5s));
  CHECK(shim.metric("gvirtus_gpus 2"));
  CHECK(shim.metric("gvirtus_gpu_memory_total_bytes{gpu=\"0\"} 85899345920"));

  std::vector<std::unique_ptr<test::TcpClient>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<test::TcpClient>(shim.port));
  }
  CHECK(eventually([&] { return shim.metric("gvirtus_backend_connections 3"); }, 10s));

  shim.process->kill(SIGTERM);
  // Not ready at once, while the clients keep it (and the backend) alive.
  CHECK(eventually([&] { return shim.readyz() == 503; }, 2s));
  // The drain has looked and found the three clients, so it waits on them.
  REQUIRE(eventually([&] { return shim.logged("clients still connected connections=3"); }, 10s));
  CHECK(shim.process->running());
  CHECK(test::processAlive(backend));
  for (const auto& client : clients) {
    CHECK_FALSE(client->closedByServer());
  }
  // One leaves: the drain sees it and waits on for the other two, so it does not end while
  // clients are connected (checked by its own looks, not by time passing).
  clients.pop_back();
  REQUIRE(eventually([&] { return shim.logged("clients still connected connections=2"); }, 10s));
  CHECK(shim.process->running());
  CHECK(test::processAlive(backend));
  for (const auto& client : clients) {
    CHECK_FALSE(client->closedByServer());
  }

  clients.clear();
  const auto code = shim.process->wait(10s);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK_FALSE(test::processAlive(backend));
  CHECK_FALSE(test::groupAlive(backend));  // the backend's whole group is gone
  const std::string log = shim.process->output();
  CHECK_THAT(log, Catch::Contains("fake backend: listening on"));  // its output, forwarded
  CHECK_THAT(log, Catch::Contains("no connection left"));
}

TEST_CASE("backend-shim binary: the drain timeout bounds the wait, the backend is then stopped",
          "[shim_binary]") {
  test::RunningShim shim;
  shim.start({"--drain-timeout", "1s"});
  REQUIRE(eventually([&] { return shim.readyz() == 200; }, 15s));
  test::TcpClient client(shim.port);
  REQUIRE(eventually([&] { return shim.metric("gvirtus_backend_connections 1"); }, 10s));
  const auto started = std::chrono::steady_clock::now();
  shim.process->kill(SIGTERM);
  const auto code = shim.process->wait(15s);
  const auto took = std::chrono::steady_clock::now() - started;
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK(took >= 1s);
  CHECK(took < 8s);
  CHECK(eventually([&] { return client.closedByServer(); }, 2s));
  CHECK_THAT(shim.process->output(), Catch::Contains("drain timeout reached"));
}

TEST_CASE("backend-shim binary: a backend that ignores SIGTERM is killed, the shim exits 0",
          "[shim_binary]") {
  test::RunningShim shim;
  shim.start({"--drain-timeout", "0s", "--stop-timeout", "500ms"}, {"--ignore-sigterm"});
  REQUIRE(eventually([&] { return shim.readyz() == 200; }, 15s));
  const pid_t backend = shim.backendPid();
  shim.process->kill(SIGTERM);
  const auto code = shim.process->wait(15s);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK_FALSE(test::processAlive(backend));
  CHECK_FALSE(test::groupAlive(backend));
  CHECK_THAT(shim.process->output(), Catch::Contains("SIGKILL"));
}

TEST_CASE("backend-shim binary: restarts a backend whose listener died, and counts it",
          "[shim_binary]") {
  test::RunningShim shim;
  shim.start({}, {"--child-exit-after", "3"});
  const bool ready = eventually([&] { return shim.readyz() == 200; }, 15s);
  const bool lost = ready && eventually([&] { return shim.readyz() == 503; }, 10s);
  const bool counted =
      lost && eventually([&] { return shim.metric("gvirtus_backend_restarts_total 1"); }, 10s);
  const bool back = counted && eventually([&] { return shim.readyz() == 200; }, 10s);
  INFO(shim.process->output());
  CHECK(ready);
  CHECK(lost);  // the listener is lost
  CHECK(counted);
  CHECK(back);
  shim.process->kill(SIGTERM);
  CHECK(shim.process->wait(15s) == std::optional<int>(0));
}

TEST_CASE("backend-shim binary: default backend from $GVIRTUS_HOME, with LD_LIBRARY_PATH=lib only",
          "[shim_binary]") {
  test::TempDir home;
  std::filesystem::create_directories(home.file("bin"));
  const std::string envOut = home.file("env.txt");
  {
    std::ofstream script(home.file("bin/gvirtus-backend"));
    script << "#!/bin/sh\nexec " << test::kFakeBackend << " --env-out " << envOut << " \"$@\"\n";
  }
  std::filesystem::permissions(home.file("bin/gvirtus-backend"), std::filesystem::perms::owner_all);
  const int port = freePort();
  ChildProcess shim(
      {test::kShimBinary, "--port", std::to_string(port), "--config-out",
       home.file("properties.json"), "--health-addr", "", "--peer-check=false"},
      {"POD_NAME=", "GVIRTUS_HOME=" + home.path().string(),
       "LD_LIBRARY_PATH=" + home.file("lib/frontend").string(), test::kAsanPreloadOrder});
  REQUIRE(eventually([&] { return std::filesystem::exists(envOut); }, 10s));
  REQUIRE(eventually(
      [&] {
        std::ifstream in(envOut);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        return text == "LD_LIBRARY_PATH=" + home.file("lib").string() +
                           "\nGVIRTUS_HOME=" + home.path().string() + "\n";
      },
      5s));
  shim.kill(SIGTERM);
  CHECK(shim.wait(15s) == std::optional<int>(0));
}

TEST_CASE("backend-shim binary: --peer-check without the pod's name exits 2 with the fix",
          "[shim_binary]") {
  auto [code, out] = runShim({"--", test::kFakeBackend});
  CHECK(code == 2);
  CHECK(out ==
        "gvirtus-backend-shim: --peer-check: needs this pod's name and namespace to read its "
        "gvirtus.io/peers annotation: set POD_NAME and POD_NAMESPACE (or --pod-name, "
        "--pod-namespace), or pass --peer-check=false\n");

  std::tie(code, out) =
      runShim({"--peer-guard-library", "/no/such/guard.so", "--", test::kFakeBackend},
              {"POD_NAME=backend-0", "POD_NAMESPACE=gvirtus-system"});
  CHECK(code == 2);
  CHECK(out ==
        "gvirtus-backend-shim: --peer-guard-library: /no/such/guard.so is not a file (stage "
        "libgvirtus-peer-guard.so there, or pass --peer-check=false)\n");
}

TEST_CASE("backend-shim binary: sessions only from the addresses in gvirtus.io/peers",
          "[shim_binary]") {
  test::FakePodApi api("gvirtus-system", "backend-0");
  api.setPeers("127.0.0.2");
  test::RunningShim shim;
  api.writeKubeconfig(shim.dir.file("kubeconfig"));
  shim.env = {"POD_NAME=backend-0", "POD_NAMESPACE=gvirtus-system",
              "GVIRTUS_HOME=", test::kAsanPreloadOrder};
  shim.start({"--kubeconfig", shim.dir.file("kubeconfig"), "--peer-check", "--peer-wait", "3s",
              "--log-level", "debug", "--drain-timeout", "1s"});
  // The shim's log as it is when a wait fails (INFO keeps the text it is given).
  const bool ready = eventually([&] { return shim.readyz() == 200; }, 15s) &&
                     eventually([&] { return shim.metric("gvirtus_backend_peers 1"); }, 10s);
  INFO(shim.process->output());
  REQUIRE(ready);

  test::LoopbackClient listed(shim.port, "127.0.0.2");
  REQUIRE(eventually([&] { return shim.metric("gvirtus_backend_sessions_allowed_total 1"); }, 10s));
  CHECK_FALSE(listed.closedWithin(0ms));

  test::LoopbackClient stranger(shim.port, "127.0.0.3");
  stranger.send("hello");
  CHECK(stranger.closedWithin(15s));
  CHECK(eventually([&] { return shim.metric("gvirtus_backend_sessions_refused_total 1"); }, 5s));
  CHECK(shim.logged("refused a session"));
  CHECK(shim.logged("peer=127.0.0.3"));

  // A pod that connects before the webhook lists it waits for the annotation.
  test::LoopbackClient early(shim.port, "127.0.0.4");
  REQUIRE(eventually(
      [&] { return shim.logged("waiting for the peer list to hold the address peer=127.0.0.4"); },
      10s));
  api.setPeers("127.0.0.2,127.0.0.4");
  CHECK(eventually([&] { return shim.metric("gvirtus_backend_sessions_allowed_total 2"); }, 10s));
  CHECK_FALSE(early.closedWithin(0ms));
  CHECK(shim.metric("gvirtus_backend_peers 2"));

  shim.process->kill(SIGTERM);
  CHECK(shim.process->wait(15s) == std::optional<int>(0));
}

TEST_CASE("backend-shim binary: with the pod unreadable, every session is refused",
          "[shim_binary]") {
  test::RunningShim shim;
  // A kubeconfig whose server does not answer: the peer list never comes.
  const int nobody = freePort();
  std::ofstream(shim.dir.file("kubeconfig"))
      << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: "
         "http://127.0.0.1:"
      << nobody
      << "\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c\n  context: "
         "{cluster: c, user: u}\ncurrent-context: c\n";
  shim.env = {"POD_NAME=backend-0", "POD_NAMESPACE=gvirtus-system",
              "GVIRTUS_HOME=", test::kAsanPreloadOrder};
  shim.start(
      {"--kubeconfig", shim.dir.file("kubeconfig"), "--peer-check=true", "--peer-wait", "200ms"});
  INFO(shim.process->output());
  REQUIRE(eventually([&] { return shim.readyz() == 200; }, 15s));
  test::LoopbackClient client(shim.port, "127.0.0.2");
  client.send("hello");
  CHECK(client.closedWithin(15s));
  CHECK(eventually([&] { return shim.metric("gvirtus_backend_sessions_refused_total 1"); }, 5s));
  CHECK(shim.metric("gvirtus_backend_sessions_allowed_total 0"));
  shim.process->kill(SIGTERM);
  CHECK(shim.process->wait(15s) == std::optional<int>(0));
}
