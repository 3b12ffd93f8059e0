// A draining shim: not ready, and its peer check refuses every new session while the open
// ones go on.
#include <catch2/catch.hpp>
#include <memory>

#include "backend-shim/fake_pod_api.h"
#include "backend-shim/peer_guard_test_support.h"
#include "backend-shim/running_shim.h"
#include "support/cluster_env.h"

using namespace std::chrono_literals;
namespace test = gvirtus::backend_shim::test;
using gvirtus::testing::eventually;

namespace {

int occurrences(const std::string& text, const std::string& part) {
  int count = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("backend-shim binary: a draining backend takes no new session, open ones go on",
          "[shim_binary]") {
  test::FakePodApi api("gvirtus-system", "backend-0");
  api.setPeers("127.0.0.2,127.0.0.3");
  test::RunningShim shim;
  api.writeKubeconfig(shim.dir.file("kubeconfig"));
  shim.env = {"POD_NAME=backend-0", "POD_NAMESPACE=gvirtus-system",
              "GVIRTUS_HOME=", test::kAsanPreloadOrder};
  shim.start({"--kubeconfig", shim.dir.file("kubeconfig"), "--peer-check", "--drain-timeout", "30s",
              "--log-level", "debug"});
  INFO(shim.process->output());
  REQUIRE(eventually([&] { return shim.readyz() == 200; }, 15s));
  REQUIRE(eventually([&] { return shim.metric("gvirtus_backend_peers 2"); }, 10s));
  auto open = std::make_unique<test::LoopbackClient>(shim.port, "127.0.0.2");
  REQUIRE(eventually([&] { return shim.metric("gvirtus_backend_sessions_allowed_total 1"); }, 10s));

  shim.process->kill(SIGTERM);
  REQUIRE(eventually([&] { return shim.readyz() == 503; }, 5s));
  REQUIRE(eventually([&] { return shim.logged("refuses every new session"); }, 5s));
  // A listed pod that connects now (a frontend restarted during the drain) is refused.
  test::LoopbackClient late(shim.port, "127.0.0.3");
  late.send("hello");
  CHECK(late.closedWithin(15s));
  CHECK(eventually([&] { return shim.metric("gvirtus_backend_sessions_refused_total 1"); }, 5s));
  CHECK(shim.metric("gvirtus_backend_sessions_allowed_total 1"));
  // The open session goes on, and the drain waits for it.
  CHECK_FALSE(open->closedWithin(0ms));
  CHECK(shim.process->running());
  CHECK(occurrences(shim.process->output(), "refuses every new session") == 1);
  CHECK_FALSE(shim.logged("WARN refused a session"));  // one line said it all

  open.reset();
  CHECK(shim.process->wait(15s) == std::optional<int>(0));
  CHECK(shim.logged("no connection left"));
}
