#include "backend-shim/backend/supervisor.h"

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <memory>
#include <mutex>
#include <thread>

#include "backend-shim/backend/config.h"
#include "backend-shim/shim_test_support.h"
#include "support/cluster_env.h"

using namespace gvirtus::backend_shim;
using namespace std::chrono_literals;
using gvirtus::testing::eventually;
using gvirtus::testing::freePort;

namespace {

struct Fixture {
  test::TempDir dir;
  int port = freePort();
  std::string config = test::writeConfig(dir, port);
  std::string marker = dir.file("starts.txt");

  // Fast probing, quick restarts, no jitter.
  SupervisorOptions options(std::vector<std::string> fakeOptions = {}) {
    SupervisorOptions o;
    o.argv = {test::kFakeBackend, "--marker", marker};
    o.argv.insert(o.argv.end(), fakeOptions.begin(), fakeOptions.end());
    o.argv.push_back(config);
    o.env = currentEnvironment();
    o.port = static_cast<uint16_t>(port);
    o.probeInterval = 50ms;
    o.startupTimeout = 10s;
    o.stopTimeout = 2s;
    o.backoffInitial = 100ms;
    o.backoffMax = 5s;
    o.backoffJitter = 0;
    return o;
  }
  std::vector<test::Start> starts() const { return test::readStarts(marker); }

  // The delays the supervisor scheduled restarts with, in order.
  std::mutex mutex;
  std::vector<gvirtus::Duration> delays;
  std::vector<std::string> reasons;
  void recordDelays(SupervisorOptions& o) {
    o.onRestartScheduled = [this](gvirtus::Duration delay, const std::string& why) {
      std::lock_guard lock(mutex);
      delays.push_back(delay);
      reasons.push_back(why);
    };
  }
  std::vector<gvirtus::Duration> scheduled() {
    std::lock_guard lock(mutex);
    return delays;
  }
  std::string firstReason() {
    std::lock_guard lock(mutex);
    return reasons.empty() ? "" : reasons.front();
  }
};

}  // namespace

TEST_CASE("backend-shim supervisor: readiness follows the port's LISTEN state", "[supervisor]") {
  Fixture f;
  Supervisor supervisor(f.options());
  CHECK_FALSE(supervisor.status().listening);
  supervisor.start();
  REQUIRE(eventually([&] { return supervisor.status().listening; }, 10s));
  const auto status = supervisor.status();
  CHECK(status.running);
  CHECK(status.pid > 0);
  CHECK(status.starts == 1);
  CHECK(status.restarts == 0);
  supervisor.stop();
  CHECK_FALSE(supervisor.status().listening);
  CHECK_FALSE(supervisor.status().running);
  CHECK_FALSE(test::processAlive(status.pid));
}

TEST_CASE("backend-shim supervisor: connection counts match the connected clients",
          "[supervisor]") {
  Fixture f;
  Supervisor supervisor(f.options());
  supervisor.start();
  REQUIRE(eventually([&] { return supervisor.status().listening; }, 10s));
  CHECK(supervisor.status().connections == 0);
  std::vector<std::unique_ptr<test::TcpClient>> clients;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(std::make_unique<test::TcpClient>(f.port));
  }
  CHECK(eventually([&] { return supervisor.status().connections == 5; }, 5s));
  clients.resize(2);
  CHECK(eventually([&] { return supervisor.status().connections == 2; }, 5s));
  clients.clear();
  CHECK(eventually([&] { return supervisor.status().connections == 0; }, 5s));
  CHECK(supervisor.status().restarts == 0);
}

TEST_CASE("backend-shim supervisor: restarts the backend when it exits", "[supervisor]") {
  test::SubreaperScope subreaper;  // as PID 1: the exiting parent's child becomes ours
  Fixture f;
  auto options = f.options({"--exit-after", "0.3"});
  options.reapScope = ReapScope::AnyChild;
  f.recordDelays(options);
  Supervisor supervisor(options);
  supervisor.start();
  // The restart is counted before the new backend writes its marker: wait for both.
  REQUIRE(
      eventually([&] { return supervisor.status().restarts >= 2 && f.starts().size() >= 3; }, 30s));
  CHECK(f.firstReason() == "the backend exited: exit code 3");
  const auto starts = f.starts();
  REQUIRE(starts.size() >= 3);
  // Every earlier run is gone, its orphaned listening child included.
  for (std::size_t i = 0; i + 1 < starts.size(); ++i) {
    CHECK_FALSE(test::processAlive(starts[i].pid));
  }
  // A parent that just exited is a zombie until the next probe reaps it, no longer.
  CHECK(eventually([] { return test::childrenOf(::getpid(), true).empty(); }, 2s));
  supervisor.stop();
  CHECK(test::childrenOf(::getpid(), false).empty());
}

TEST_CASE(
    "backend-shim supervisor: restarts when the port stops listening while the process lives on",
    "[supervisor]") {
  Fixture f;
  auto options = f.options({"--child-exit-after", "2"});
  f.recordDelays(options);
  Supervisor supervisor(options);
  supervisor.start();
  REQUIRE(eventually([&] { return supervisor.status().listening; }, 10s));
  const pid_t first = supervisor.status().pid;
  CHECK(test::processAlive(first));
  // The child dies, the parent idles listening on nothing: the shim must notice.
  REQUIRE(eventually([&] { return supervisor.status().restarts >= 1; }, 15s));
  CHECK_FALSE(test::processAlive(first));
  CHECK_THAT(f.firstReason(), Catch::Contains("stopped listening while the process lives on"));
  REQUIRE(eventually([&] { return supervisor.status().listening; }, 10s));
  CHECK(supervisor.status().pid != first);
}

TEST_CASE(
    "backend-shim supervisor: not ready at once when the port stops listening, though "
    "stopping the backend takes its grace period",
    "[supervisor]") {
  Fixture f;
  // The parent ignores SIGTERM: stopping its group takes the whole stopTimeout.
  auto options = f.options({"--child-exit-after", "1", "--ignore-sigterm"});
  options.stopTimeout = 6s;
  f.recordDelays(options);
  Supervisor supervisor(options);
  supervisor.start();
  REQUIRE(eventually([&] { return supervisor.status().listening; }, 10s));
  ListenProbe probe(options.probePaths);
  auto portListening = [&] {
    auto state = probe.probe(options.port);
    return state && state->listening;
  };
  REQUIRE(eventually([&] { return !portListening(); }, 10s));
  const auto stoppedListening = std::chrono::steady_clock::now();
  // Within a few probe intervals, not after the 6 s it takes to stop the old group.
  REQUIRE(eventually([&] { return !supervisor.status().listening; }, 3s));
  CHECK(std::chrono::steady_clock::now() - stoppedListening < 3s);
  CHECK_FALSE(supervisor.status().running);
  // Ready again only once the new backend listens, and the restart is counted.
  REQUIRE(eventually([&] { return supervisor.status().listening; }, 20s));
  CHECK(portListening());
  CHECK(supervisor.status().restarts == 1);
}

TEST_CASE(
    "backend-shim supervisor: leaked sockets restart the backend once no client is "
    "connected",
    "[supervisor]") {
  Fixture f;
  auto options = f.options({"--leak-clients"});
  options.maxLeakedSockets = 2;
  f.recordDelays(options);
  Supervisor supervisor(options);
  supervisor.start();
  REQUIRE(eventually([&] { return supervisor.status().listening; }, 10s));
  const pid_t first = supervisor.status().pid;
  auto live = std::make_unique<test::TcpClient>(f.port);
  for (int i = 0; i < 3; ++i) {
    test::TcpClient finished(f.port);
  }
  // Three leaked, more than 2, but a client is connected: its session is not cut.
  REQUIRE(eventually([&] { return supervisor.status().leakedSockets == 3; }, 5s));
  CHECK(supervisor.status().connections == 1);
  CHECK(supervisor.status().restarts == 0);
  CHECK(supervisor.status().pid == first);
  // The last client leaves: the idle backend is restarted and the leak is gone.
  live.reset();
  REQUIRE(eventually([&] { return supervisor.status().restarts == 1; }, 10s));
  CHECK(supervisor.status().leakRestarts == 1);
  CHECK_THAT(f.firstReason(), Catch::Contains("CLOSE_WAIT") && Catch::Contains("more than 2"));
  REQUIRE(eventually([&] { return supervisor.status().listening; }, 10s));
  CHECK(supervisor.status().pid != first);
  CHECK(eventually([&] { return supervisor.status().leakedSockets == 0; }, 5s));
}

TEST_CASE(
    "backend-shim supervisor: restarts a backend that never listens after the startup timeout",
    "[supervisor]") {
  Fixture f;
  auto options = f.options();
  options.port = static_cast<uint16_t>(freePort());  // not the port the config names
  options.startupTimeout = 400ms;
  f.recordDelays(options);
  Supervisor supervisor(options);
  supervisor.start();
  REQUIRE(eventually([&] { return supervisor.status().restarts >= 1; }, 10s));
  CHECK_FALSE(supervisor.status().listening);
  CHECK_THAT(f.firstReason(), Catch::Contains("did not listen within 400ms"));
}

TEST_CASE("backend-shim supervisor: exponential backoff between restarts", "[supervisor]") {
  Fixture f;
  auto options = f.options({"--exit-after", "0.05"});
  options.backoffInitial = 300ms;
  f.recordDelays(options);
  Supervisor supervisor(options);
  supervisor.start();
  REQUIRE(eventually([&] { return f.starts().size() >= 4; }, 30s));
  supervisor.stop();
  const auto delays = f.scheduled();
  REQUIRE(delays.size() >= 3);
  CHECK(delays[0] == 300ms);
  CHECK(delays[1] == 600ms);
  CHECK(delays[2] == 1200ms);
  // And the restarts waited for them: from each exit to the next start.
  const auto starts = f.starts();
  const auto exits = test::readMarker(f.marker, "exit");
  REQUIRE(exits.size() >= 3);
  for (int i = 0; i < 3; ++i) {
    const long long wait = starts[i + 1].millis - exits[i].millis;
    INFO("exit " << i << " to start " << i + 1 << ": " << wait << " ms");
    CHECK(wait >= delays[i].count());
    CHECK(wait < delays[i].count() + 5000);
  }
}

TEST_CASE("backend-shim supervisor: the backoff is capped", "[supervisor]") {
  Fixture f;
  auto options = f.options({"--exit-after", "0.02"});
  options.backoffInitial = 50ms;
  options.backoffMax = 150ms;
  f.recordDelays(options);
  Supervisor supervisor(options);
  supervisor.start();
  REQUIRE(eventually([&] { return f.scheduled().size() >= 4; }, 30s));
  supervisor.stop();
  const auto delays = f.scheduled();
  CHECK(delays[0] == 50ms);
  CHECK(delays[1] == 100ms);
  CHECK(delays[2] == 150ms);
  CHECK(delays[3] == 150ms);
}

TEST_CASE("backend-shim supervisor: a stable run resets the backoff", "[supervisor]") {
  Fixture f;
  auto options = f.options({"--exit-after", "0.6"});
  options.backoffInitial = 400ms;
  options.stableAfter = 400ms;  // every run lasts longer than this
  f.recordDelays(options);
  Supervisor supervisor(options);
  supervisor.start();
  REQUIRE(eventually([&] { return f.scheduled().size() >= 3; }, 30s));
  supervisor.stop();
  for (const auto delay : f.scheduled()) {
    CHECK(delay == 400ms);  // never 800 ms or 1.6 s
  }
}

TEST_CASE("backend-shim supervisor: no zombies after many restarts as a subreaper",
          "[supervisor]") {
  test::SubreaperScope subreaper;
  Fixture f;
  auto options = f.options({"--exit-after", "0.1"});
  options.reapScope = ReapScope::AnyChild;
  options.backoffInitial = 50ms;
  options.backoffMax = 100ms;
  Supervisor supervisor(options);
  supervisor.start();
  REQUIRE(eventually([&] { return supervisor.status().restarts >= 5; }, 20s));
  // Let the last run end on its own: its parent and its orphaned child are then reaped.
  supervisor.holdRestarts();
  REQUIRE(eventually([&] { return !supervisor.status().running; }, 10s));
  CHECK(eventually([] { return test::childrenOf(::getpid(), true).empty(); }, 2s));
  CHECK(test::childrenOf(::getpid(), false).empty());
  supervisor.stop();
  CHECK(test::childrenOf(::getpid(), false).empty());
}

TEST_CASE("backend-shim supervisor: drain waits for the clients, then the group is stopped",
          "[supervisor]") {
  Fixture f;
  Supervisor supervisor(f.options());
  supervisor.start();
  REQUIRE(eventually([&] { return supervisor.status().listening; }, 10s));
  const pid_t backend = supervisor.status().pid;
  auto client = std::make_unique<test::TcpClient>(f.port);
  REQUIRE(eventually([&] { return supervisor.status().connections == 1; }, 5s));

  supervisor.holdRestarts();
  const auto started = std::chrono::steady_clock::now();
  CHECK_FALSE(supervisor.waitForDrain(400ms));  // the client is still there
  CHECK(std::chrono::steady_clock::now() - started >= 400ms);
  CHECK(supervisor.status().drainWaits >= 1);
  CHECK(test::processAlive(backend));

  // The client leaves while the drain waits on it: once the drain below has found it, not
  // after a guessed delay, so the drain sees it go.
  const int64_t waitsBefore = supervisor.status().drainWaits;
  bool foundByDrain = false;
  std::jthread leave([&] {
    foundByDrain = eventually([&] { return supervisor.status().drainWaits > waitsBefore; }, 10s);
    client->close();
  });
  CHECK(supervisor.waitForDrain(10s));
  leave.join();
  CHECK(foundByDrain);
  supervisor.stop();
  CHECK_FALSE(test::processAlive(backend));
  CHECK_FALSE(test::groupAlive(backend));  // the whole group is gone
}

TEST_CASE("backend-shim supervisor: a backend that exits while draining is not restarted",
          "[supervisor]") {
  Fixture f;
  Supervisor supervisor(f.options({"--exit-after", "2"}));
  supervisor.start();
  REQUIRE(eventually([&] { return supervisor.status().starts == 1; }, 10s));
  supervisor.holdRestarts();
  REQUIRE(eventually([&] { return !supervisor.status().running; }, 10s));
  // The supervisor has since decided not to start it again (as every later pass will).
  REQUIRE(eventually([&] { return supervisor.status().heldDown; }, 10s));
  CHECK(supervisor.status().restarts == 0);
  CHECK(f.starts().size() == 1);
}
