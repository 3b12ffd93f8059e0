// --sessions=per-pod with real processes: the host in this test's process, the fake backend
// (a thread per connection, state shared between them, as GVirtuS) under the real guard
// library, clients from distinct loopback addresses standing for distinct pods.
#include "backend-shim/sessions/host.h"

#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend-shim/backend/config.h"
#include "backend-shim/peer_guard_test_support.h"
#include "backend-shim/peers/gate.h"
#include "backend-shim/shim_test_support.h"
#include "support/cluster_env.h"

using namespace gvirtus::backend_shim;
using namespace std::chrono_literals;
using gvirtus::testing::eventually;
using gvirtus::testing::freePort;

namespace {

struct Host {
  test::TempDir dir;
  int port = freePort();
  std::unique_ptr<PeerGate> gate;
  std::unique_ptr<SessionHost> host;

  explicit Host(SessionHostOptions options = {}, bool withGate = false) {
    const std::string config = dir.file("properties.json");
    REQUIRE(writeBackendConfig(config, renderBackendConfig(static_cast<uint16_t>(port), {"cudart"}))
                .has_value());
    if (withGate) {
      PeerGateOptions gateOptions;
      gateOptions.wait = 3s;
      gateOptions.parentDir = dir.path();
      auto started = PeerGate::start(std::move(gateOptions));
      REQUIRE(started.has_value());
      gate = std::move(*started);
      options.gateSocket = gate->socketPath();
    }
    options.port = static_cast<uint16_t>(port);
    options.argv = {test::kFakeBackend, config};
    options.env = withPreload({test::kAsanPreloadOrder}, test::kPeerGuardLibrary);
    auto started = SessionHost::start(std::move(options));
    REQUIRE(started.has_value());
    host = std::move(*started);
    REQUIRE(eventually([&] { return host->status().ready; }, 10s));
  }
};

// One line of the stand-in's protocol and its answer.
std::string ask(test::LoopbackClient& client, const std::string& line) {
  const size_t before = client.received().size();
  client.send(line + "\n");
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline;) {
    const std::string& got = client.receive(before + 1, 100ms);
    const size_t end = got.find('\n', before);
    if (end != std::string::npos) {
      return got.substr(before, end - before);
    }
    if (client.closedWithin(0ms)) {
      break;
    }
  }
  return "";
}

bool processAlive(const std::string& pidLine) {
  const pid_t pid = std::stoi(pidLine.substr(4));
  return ::kill(pid, 0) == 0;
}

}  // namespace

TEST_CASE(
    "per-pod sessions: two pods, two processes, and one process for all of a pod's connections",
    "[session_host]") {
  Host host;
  test::LoopbackClient podA(host.port, "127.0.0.2");
  test::LoopbackClient podB(host.port, "127.0.0.3");
  const std::string pidA = ask(podA, "standin pid");
  const std::string pidB = ask(podB, "standin pid");
  REQUIRE(pidA.starts_with("pid "));
  REQUIRE(pidB.starts_with("pid "));
  CHECK(pidA != pidB);
  // A second thread of pod A reaches pod A's process, and shares its state.
  test::LoopbackClient podAgain(host.port, "127.0.0.2");
  CHECK(ask(podAgain, "standin pid") == pidA);
  CHECK(ask(podA, "standin put secret of A") == "ok");
  CHECK(ask(podAgain, "standin get") == "got secret of A");
  // What pod A wrote cannot be read through pod B's session.
  CHECK(ask(podB, "standin get") == "got ");
  CHECK(host.host->status().pods == 2);
  CHECK(host.host->status().connections == 3);
}

TEST_CASE("per-pod sessions: a crash ends its own pod's connections only", "[session_host]") {
  Host host;
  test::LoopbackClient podA(host.port, "127.0.0.2");
  test::LoopbackClient podB(host.port, "127.0.0.3");
  const std::string pidA = ask(podA, "standin pid");
  const std::string pidB = ask(podB, "standin pid");
  podA.send("standin crash\n");
  CHECK(podA.closedWithin(10s));
  CHECK(ask(podB, "standin pid") == pidB);
  CHECK(eventually([&] { return host.host->status().processesLost == 1; }, 10s));
  CHECK(host.host->status().ready);
  // Pod A comes back to a fresh process.
  test::LoopbackClient podAgain(host.port, "127.0.0.2");
  const std::string fresh = ask(podAgain, "standin pid");
  CHECK(fresh.starts_with("pid "));
  CHECK(fresh != pidA);
}

TEST_CASE("per-pod sessions: a pod's process ends with its last connection", "[session_host]") {
  Host host;
  std::string pid;
  {
    test::LoopbackClient podA(host.port, "127.0.0.2");
    test::LoopbackClient podAgain(host.port, "127.0.0.2");
    pid = ask(podA, "standin pid");
    CHECK(ask(podAgain, "standin pid") == pid);
  }
  CHECK(eventually([&] { return host.host->status().pods == 0; }, 10s));
  CHECK(eventually([&] { return !processAlive(pid); }, 10s));
  // The pool is filled again.
  CHECK(eventually([&] { return host.host->status().idle == 2; }, 10s));
}

TEST_CASE("per-pod sessions: --max-connections-per-pod and --max-sessions are enforced at accept",
          "[session_host]") {
  SessionHostOptions options;
  options.maxSessions = 1;
  options.maxConnectionsPerPod = 2;
  std::mutex kindsMutex;
  std::vector<std::string> kinds;  // told on the host's thread
  options.onRefused = [&](const char* kind) {
    std::lock_guard lock(kindsMutex);
    kinds.emplace_back(kind);
  };
  Host host(options);
  test::LoopbackClient first(host.port, "127.0.0.2");
  test::LoopbackClient second(host.port, "127.0.0.2");
  REQUIRE(ask(first, "standin pid").starts_with("pid "));
  REQUIRE(ask(second, "standin pid").starts_with("pid "));
  test::LoopbackClient third(host.port, "127.0.0.2");
  third.send("standin pid\n");
  CHECK(third.closedWithin(10s));
  CHECK(third.received().empty());
  test::LoopbackClient otherPod(host.port, "127.0.0.3");
  otherPod.send("standin pid\n");
  CHECK(otherPod.closedWithin(10s));
  CHECK(otherPod.received().empty());
  CHECK(eventually([&] { return host.host->status().refused == 2; }, 10s));
  std::lock_guard lock(kindsMutex);
  CHECK(kinds == std::vector<std::string>{"max-connections-per-pod", "max-sessions"});
}

TEST_CASE("per-pod sessions: a listed pod is served while unlisted addresses wait on the gate",
          "[session_host]") {
  Host host({}, true);
  host.gate->setPeers(PeerList({*parseIpv4("127.0.0.2")}));
  // Unlisted addresses knock first; each waits for the list (up to 3 s) without holding
  // up the accept of the next.
  std::vector<std::unique_ptr<test::LoopbackClient>> strangers;
  for (int i = 10; i < 20; ++i) {
    strangers.push_back(
        std::make_unique<test::LoopbackClient>(host.port, "127.0.1." + std::to_string(i)));
  }
  REQUIRE(eventually([&] { return host.gate->waiting() == 10; }, 10s));
  const auto before = std::chrono::steady_clock::now();
  test::LoopbackClient pod(host.port, "127.0.0.2");
  CHECK(ask(pod, "standin pid").starts_with("pid "));
  CHECK(std::chrono::steady_clock::now() - before < 2s);  // well inside the strangers' wait
  for (auto& stranger : strangers) {
    stranger->send("standin pid\n");
    CHECK(stranger->closedWithin(10s));
    CHECK(stranger->received().empty());
  }
}

TEST_CASE("per-pod sessions: a pod's GPU memory share caps its own process's allocations",
          "[session_host]") {
  constexpr uint64_t kGiB = 1ull << 30;
  auto gib = [](uint64_t n) { return std::to_string(n * kGiB); };
  SessionHostOptions options;
  options.gpuMemoryShare = [](Ipv4 pod) -> std::optional<uint64_t> {
    return pod == *parseIpv4("127.0.0.2") ? std::optional(4 * kGiB) : std::nullopt;
  };
  Host host(std::move(options));
  test::LoopbackClient capped(host.port, "127.0.0.2");
  test::LoopbackClient whole(host.port, "127.0.0.3");

  // A share of 4 GiB: 3 fit; 2 more are refused without reaching CUDA, through the runtime's
  // call or the driver's.
  const std::string first = ask(capped, "standin cuda malloc " + gib(3));
  REQUIRE(first.starts_with("0 "));
  CHECK(ask(capped, "standin cuda malloc " + gib(2)) == "2 0");
  CHECK(ask(capped, "standin cuda cumalloc " + gib(2)) == "2 0");
  CHECK(ask(capped, "standin cuda reached") == "1");
  // The share is what the process sees of the GPU: a framework sizes its pool to it.
  CHECK(ask(capped, "standin cuda meminfo") == "0 " + gib(1) + " " + gib(4));
  // Freed, its room is there again, for either API.
  CHECK(ask(capped, "standin cuda free " + first.substr(2)) == "0");
  const std::string driver = ask(capped, "standin cuda cumalloc " + gib(4));
  CHECK(driver.starts_with("0 "));
  CHECK(ask(capped, "standin cuda malloc 1") == "2 0");
  CHECK(ask(capped, "standin cuda cufree " + driver.substr(2)) == "0");
  CHECK(ask(capped, "standin cuda malloc 1").starts_with("0 "));
  // A pitched allocation holds its rows as the driver padded them (1 KiB here, more than the
  // guard reserves for): 2 GiB of 2 Mi rows of 1 byte fit, the same again passes the share
  // once padded and is given back and refused.
  const std::string rows = std::to_string(1 << 21);
  CHECK(ask(capped, "standin cuda pitch 1 " + rows).starts_with("0 "));
  CHECK(ask(capped, "standin cuda pitch 1 " + rows).starts_with("2 "));
  CHECK(ask(capped, "standin cuda meminfo") == "0 " + std::to_string(2 * kGiB - 1) + " " + gib(4));

  // A pod without a share has the whole GPU (16 GiB here), in a process of its own.
  CHECK(ask(whole, "standin cuda malloc " + gib(8)).starts_with("0 "));
  CHECK(ask(whole, "standin cuda meminfo") == "0 " + gib(8) + " " + gib(16));
}

TEST_CASE("per-pod sessions: a share written after a pod's first connection reaches its process",
          "[session_host]") {
  constexpr uint64_t kGiB = 1ull << 30;
  auto share = std::make_shared<std::atomic<uint64_t>>(0);
  SessionHostOptions options;
  options.gpuMemoryShare = [share](Ipv4) -> std::optional<uint64_t> {
    const uint64_t bytes = share->load();
    return bytes == 0 ? std::nullopt : std::optional(bytes);
  };
  Host host(std::move(options));
  test::LoopbackClient pod(host.port, "127.0.0.2");
  // No share yet (a fraction before the backend's first load report): the whole GPU.
  CHECK(ask(pod, "standin cuda malloc " + std::to_string(3 * kGiB)).starts_with("0 "));
  share->store(4 * kGiB);
  const std::string one = "standin cuda malloc " + std::to_string(kGiB);
  const std::string two = "standin cuda malloc " + std::to_string(2 * kGiB);
  // Within a second or so the process has it: 1 GiB more fits, 2 more do not.
  CHECK(eventually(
      [&] { return ask(pod, "standin cuda meminfo").ends_with(std::to_string(4 * kGiB)); }, 5s));
  CHECK(ask(pod, two) == "2 0");
  CHECK(ask(pod, one).starts_with("0 "));
}

TEST_CASE("per-pod sessions: drained, a new connection is refused and open ones go on",
          "[session_host]") {
  Host host;
  test::LoopbackClient pod(host.port, "127.0.0.2");
  const std::string pid = ask(pod, "standin pid");
  host.host->refuseNewSessions();
  test::LoopbackClient late(host.port, "127.0.0.3");
  late.send("standin pid\n");
  CHECK(late.closedWithin(10s));
  CHECK(ask(pod, "standin pid") == pid);
  CHECK_FALSE(host.host->waitForDrain(100ms));
}

TEST_CASE("the stand-in shares state across connections of one process, as GVirtuS does",
          "[session_host]") {
  // Without the host (--sessions=shared): the check the tests above make fails, as it must.
  test::TempDir dir;
  const int port = freePort();
  const std::string config = dir.file("properties.json");
  REQUIRE(writeBackendConfig(config, renderBackendConfig(static_cast<uint16_t>(port), {"cudart"}))
              .has_value());
  gvirtus::testing::ChildProcess backend({test::kFakeBackend, config}, {}, dir.file("backend.log"));
  REQUIRE(eventually([&] { return backend.output().find("listening") != std::string::npos; }, 10s));
  test::LoopbackClient podA(port, "127.0.0.2");
  test::LoopbackClient podB(port, "127.0.0.3");
  CHECK(ask(podA, "standin put secret of A") == "ok");
  CHECK(ask(podB, "standin get") == "got secret of A");
  CHECK(ask(podA, "standin pid") == ask(podB, "standin pid"));
}
