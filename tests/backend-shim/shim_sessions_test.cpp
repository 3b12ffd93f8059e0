// gvirtus-backend-shim with --sessions=per-pod, as a black box: the binary over the fake
// backend, clients from distinct loopback addresses standing for pods.
#include <signal.h>

#include <catch2/catch.hpp>
#include <string>

#include "backend-shim/running_shim.h"

using namespace std::chrono_literals;
using gvirtus::testing::eventually;
namespace test = gvirtus::backend_shim::test;

namespace {

// "standin pid" over `client`: the serving process's answer line.
std::string servingPid(test::LoopbackClient& client) {
  const size_t before = client.received().size();
  client.send("standin pid\n");
  const std::string& got = client.receive(before + 8, 10s);
  const size_t end = got.find('\n', before);
  return end == std::string::npos ? "" : got.substr(before, end - before);
}

}  // namespace

TEST_CASE("backend-shim binary, per-pod: ready, a process per pod, drained on SIGTERM",
          "[shim_sessions]") {
  test::RunningShim shim;
  shim.start({"--sessions=per-pod", "--session-pool", "1", "--drain-timeout", "20s"});
  REQUIRE(eventually([&] { return shim.readyz() == 200; }, 15s));
  CHECK(eventually([&] { return shim.metric("gvirtus_backend_up 1"); }, 5s));

  auto podA = std::make_unique<test::LoopbackClient>(shim.port, "127.0.0.2");
  auto podB = std::make_unique<test::LoopbackClient>(shim.port, "127.0.0.3");
  const std::string pidA = servingPid(*podA);
  const std::string pidB = servingPid(*podB);
  REQUIRE(pidA.starts_with("pid "));
  REQUIRE(pidB.starts_with("pid "));
  CHECK(pidA != pidB);
  // The load and the metrics count pods: what --max-sessions bounds.
  CHECK(eventually([&] { return shim.metric("gvirtus_backend_connections 2"); }, 10s));

  shim.process->kill(SIGTERM);
  CHECK(eventually([&] { return shim.readyz() == 503; }, 2s));
  // Open sessions go on while the drain waits; a new pod is refused.
  CHECK(servingPid(*podA) == pidA);
  test::LoopbackClient late(shim.port, "127.0.0.4");
  late.send("standin pid\n");
  CHECK(late.closedWithin(10s));
  CHECK(late.received().empty());
  CHECK(shim.process->running());

  podA.reset();
  podB.reset();
  const auto code = shim.process->wait(15s);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK_THAT(shim.process->output(), Catch::Contains("no connection left"));
  CHECK_THAT(shim.process->output(), Catch::Contains("serving a pod in a process of its own"));
}
