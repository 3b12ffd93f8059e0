// The supervisor starts the backend only into a port it can bind: the fake backend binds as
// GVirtuS does (no working SO_REUSEADDR), and here runs without the peer guard, so a socket
// left on the port keeps it from listening.
#include <catch2/catch.hpp>
#include <chrono>

#include "backend-shim/backend/config.h"
#include "backend-shim/backend/supervisor.h"
#include "backend-shim/shim_test_support.h"
#include "support/cluster_env.h"

using namespace gvirtus::backend_shim;
using namespace std::chrono_literals;
using gvirtus::testing::eventually;
using gvirtus::testing::freePort;

namespace {

long long epochMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct PortFixture {
  test::TempDir dir;
  int port = freePort();
  std::string config = test::writeConfig(dir, port);
  std::string marker = dir.file("starts.txt");

  // A startup timeout far shorter than the waits below: a wait that counted towards it
  // would show as a restart.
  SupervisorOptions options() const {
    SupervisorOptions o;
    o.argv = {test::kFakeBackend, "--marker", marker, config};
    o.env = currentEnvironment();
    o.port = static_cast<uint16_t>(port);
    o.probeInterval = 50ms;
    o.startupTimeout = 300ms;
    o.stopTimeout = 2s;
    o.backoffInitial = 100ms;
    o.backoffJitter = 0;
    return o;
  }
  std::vector<test::Start> starts() const { return test::readStarts(marker); }
};

}  // namespace

TEST_CASE(
    "backend-shim supervisor: no start while the port cannot be bound, a start the moment "
    "it can",
    "[supervisor]") {
  PortFixture f;
  test::PortBlocker blocker(f.port);
  Supervisor supervisor(f.options());
  supervisor.start();
  REQUIRE(eventually([&] { return supervisor.status().portWaiting; }, 10s));
  // A socket bound without listening is in no socket table: nothing to name.
  CHECK(supervisor.status().portHeldBy.empty());
  // Longer than the startup timeout, and still no start and no restart.
  REQUIRE(eventually([&] { return supervisor.status().portWaitSeconds > 0.6; }, 10s));
  auto status = supervisor.status();
  CHECK(status.starts == 0);
  CHECK(status.restarts == 0);
  CHECK(status.portWaits == 1);
  CHECK(f.starts().empty());

  const long long released = epochMillis();
  blocker.release();
  REQUIRE(eventually([&] { return supervisor.status().listening; }, 10s));
  const auto starts = f.starts();
  REQUIRE(starts.size() == 1);
  // Within a poll of the port (100 ms), not after a probe interval, backoff or timeout.
  CHECK(starts[0].millis - released < 1000);
  status = supervisor.status();
  CHECK_FALSE(status.portWaiting);
  CHECK(status.portWaits == 1);
  CHECK(status.restarts == 0);
}

TEST_CASE(
    "backend-shim supervisor: a backend killed with a client connected is started again "
    "only once the lingering connection is gone",
    "[supervisor]") {
  PortFixture f;
  auto options = f.options();
  // Whether the supervisor takes the backend to get SO_REUSEADDR or not: the connection
  // lingers from a listener without it, so it holds the port either way.
  options.reuseAddress = GENERATE(false, true);
  Supervisor supervisor(options);
  supervisor.start();
  REQUIRE(eventually([&] { return supervisor.status().listening; }, 10s));
  const pid_t first = supervisor.status().pid;
  test::TcpClient client(f.port);
  REQUIRE(eventually([&] { return supervisor.status().connections == 1; }, 5s));

  // The server's side of the connection is closed by the kernel and lingers (FIN_WAIT2, for
  // a minute): GVirtuS started now would fail to bind and never listen.
  test::killListeningChild(first);
  REQUIRE(eventually([&] { return supervisor.status().portWaiting; }, 10s));
  CHECK_THAT(supervisor.status().portHeldBy, Catch::Contains("FIN_WAIT"));
  REQUIRE(eventually([&] { return supervisor.status().portWaitSeconds > 0.6; }, 10s));
  CHECK(supervisor.status().starts == 1);
  CHECK(f.starts().size() == 1);

  // The connection ends (reset): the port is free, and the backend starts at once.
  const long long released = epochMillis();
  client.reset();
  REQUIRE(eventually([&] { return supervisor.status().listening; }, 10s));
  const auto starts = f.starts();
  REQUIRE(starts.size() == 2);
  CHECK(starts[1].millis - released < 1000);
  CHECK(supervisor.status().restarts == 1);
  CHECK(supervisor.status().portWaits == 1);
}
