// A backend restarted in its pod listens again at once, though the connections of the run
// before linger on its port: the fake backend asks for SO_REUSEADDR as GVirtuS does (a value
// Linux refuses), and the guard the shim preloads makes the request work.
#include <catch2/catch.hpp>
#include <chrono>

#include "backend-shim/backend/listen_probe.h"
#include "backend-shim/running_shim.h"
#include "backend-shim/shim_test_support.h"
#include "support/cluster_env.h"

using namespace std::chrono_literals;
namespace test = gvirtus::backend_shim::test;
using gvirtus::backend_shim::ListenProbe;
using gvirtus::testing::eventually;

namespace {

constexpr size_t kFinWait1 = 4;
constexpr size_t kFinWait2 = 5;

// Sockets the server's side left closing on the port (the kernel closed them for the killed
// backend; the client has not hung up).
int lingering(const ListenProbe& probe, int port) {
  auto state = probe.probe(static_cast<uint16_t>(port));
  return state ? state->byState[kFinWait1] + state->byState[kFinWait2] : -1;
}

}  // namespace

TEST_CASE(
    "backend-shim binary: a backend killed while a client is connected listens again within "
    "seconds",
    "[shim_binary]") {
  test::RunningShim shim;
  shim.start({});
  INFO(shim.process->output());
  REQUIRE(eventually([&] { return shim.readyz() == 200; }, 15s));
  const pid_t first = shim.backendPid();
  test::TcpClient client(shim.port);
  REQUIRE(eventually([&] { return shim.metric("gvirtus_backend_connections 1"); }, 10s));

  const auto killed = std::chrono::steady_clock::now();
  test::killListeningChild(first);
  const ListenProbe probe;
  // The connection lingers on the port, closing: GVirtuS alone could not bind it for a minute.
  REQUIRE(eventually([&] { return lingering(probe, shim.port) >= 1; }, 5s));

  REQUIRE(eventually([&] { return shim.backendPid() != first && shim.readyz() == 200; }, 20s));
  CHECK(std::chrono::steady_clock::now() - killed < 8s);
  CHECK(lingering(probe, shim.port) >= 1);  // it still lingers: the new backend bound beside it
  CHECK_FALSE(shim.logged("Can't bind socket"));
  CHECK(eventually([&] { return shim.metric("gvirtus_backend_restarts_total 1"); }, 5s));
  CHECK(shim.metric("gvirtus_backend_port_waits_total 0"));
  CHECK(shim.metric("gvirtus_backend_port_waiting 0"));

  shim.process->kill(SIGTERM);
  CHECK(shim.process->wait(15s) == std::optional<int>(0));
}
