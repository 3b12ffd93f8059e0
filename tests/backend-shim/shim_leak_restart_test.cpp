// The shim's leak restart, as a black box over the fake backend and the fake pod API: it
// waits while no other backend pod is Ready (and says so on /metrics), is not ready while it
// makes sure another stays Ready, and after --leak-restart-max-defer goes anyway.
#include <catch2/catch.hpp>

#include "backend-shim/fake_pod_api.h"
#include "backend-shim/running_shim.h"
#include "support/cluster_env.h"

using namespace std::chrono_literals;
namespace test = gvirtus::backend_shim::test;
using gvirtus::testing::eventually;

namespace {

// A shim whose backend leaks its finished clients' sockets, past --max-leaked-sockets=2.
void startLeaking(test::RunningShim& shim, test::FakePodApi& api, const std::string& maxDefer) {
  api.writeKubeconfig(shim.dir.file("kubeconfig"));
  shim.env = {"POD_NAME=backend-0", "POD_NAMESPACE=gvirtus-system",
              "GVIRTUS_HOME=", test::kAsanPreloadOrder};
  shim.start({"--kubeconfig", shim.dir.file("kubeconfig"), "--max-leaked-sockets", "2",
              "--leak-restart-max-defer", maxDefer},
             {"--leak-clients"});
  REQUIRE(eventually([&] { return shim.readyz() == 200; }, 15s));
  for (int i = 0; i < 3; ++i) {
    test::TcpClient finished(shim.port);
  }
  REQUIRE(eventually([&] { return shim.metric("gvirtus_backend_leaked_sockets 3"); }, 10s));
}

}  // namespace

TEST_CASE("backend-shim binary: alone, a leak restart waits, then goes after the bound",
          "[shim_binary]") {
  test::FakePodApi api("gvirtus-system", "backend-0");
  test::RunningShim shim;
  // A bound long enough that a loaded machine sees the deferral well before it.
  startLeaking(shim, api, "12s");
  INFO(shim.process->output());
  REQUIRE(eventually([&] { return shim.metric("gvirtus_backend_leak_restarts_deferred_total 1"); },
                     10s));
  CHECK(shim.logged("leak restart deferred"));
  CHECK(shim.logged("no other backend pod is ready"));
  CHECK(shim.metric("gvirtus_backend_leak_restarts_total 0"));
  CHECK(shim.readyz() == 200);  // it serves on meanwhile
  REQUIRE(eventually([&] { return shim.metric("gvirtus_backend_leak_restarts_total 1"); }, 25s));
  CHECK(eventually([&] { return shim.metric("gvirtus_backend_leaked_sockets 0"); }, 10s));
  CHECK(eventually([&] { return shim.readyz() == 200; }, 10s));
}

TEST_CASE("backend-shim binary: with another backend Ready, not ready until the restart",
          "[shim_binary]") {
  test::FakePodApi api("gvirtus-system", "backend-0");
  api.addPod("backend-1", true);
  test::RunningShim shim;
  startLeaking(shim, api, "5m");
  INFO(shim.process->output());
  REQUIRE(eventually([&] { return shim.readyz() == 503; }, 10s));
  CHECK(eventually([&] { return shim.metric("gvirtus_backend_ready 0"); }, 5s));
  CHECK(shim.metric("gvirtus_backend_leak_restarts_total 0"));
  api.setReady("backend-0", false);  // the kubelet, after the failed probes
  REQUIRE(eventually([&] { return shim.metric("gvirtus_backend_leak_restarts_total 1"); }, 15s));
  CHECK(eventually([&] { return shim.readyz() == 200; }, 10s));
  CHECK(shim.metric("gvirtus_backend_leak_restarts_deferred_total 0"));
}
