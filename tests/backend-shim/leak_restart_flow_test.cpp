// The leak restart held by the gate, end to end but for the cluster: the fake backend leaks
// its finished clients' sockets under a real Supervisor, and the gate reads the backend pods
// from the fake pod API through the Kubernetes client, as the shim does.
#include <catch2/catch.hpp>

#include "backend-shim/backend/config.h"
#include "backend-shim/backend/process_group.h"
#include "backend-shim/backend/supervisor.h"
#include "backend-shim/fake_pod_api.h"
#include "backend-shim/leak_restart/gate.h"
#include "backend-shim/shim_test_support.h"
#include "common/kube/access/config.h"
#include "common/kube/client.h"
#include "support/cluster_env.h"

using namespace gvirtus::backend_shim;
using namespace std::chrono_literals;
using gvirtus::testing::eventually;

TEST_CASE("backend-shim leak restart: waits, through the API, for another backend to be Ready",
          "[leak_restart]") {
  test::FakePodApi api("gvirtus-system", "backend-0");
  api.addPod("backend-1", false);
  api.addPod("webhook-0", true, "webhook");  // Ready, but not a backend: not selected
  test::TempDir dir;
  api.writeKubeconfig(dir.file("kubeconfig"));
  auto kubeconfig = gvirtus::loadKubeconfigFile(dir.file("kubeconfig"));
  REQUIRE(kubeconfig.has_value());
  auto client = gvirtus::KubeClient::create(*kubeconfig);
  REQUIRE(client.has_value());

  LeakRestartGateOptions gateOptions;
  gateOptions.self = "backend-0";
  gateOptions.listBackends =
      backendPodLister(**client, "gvirtus-system", "app.kubernetes.io/component=backend");
  gateOptions.look = 50ms;
  gateOptions.retry = 100ms;
  gateOptions.settleTimeout = 20s;
  gateOptions.jitter = 50ms;
  LeakRestartGate gate(std::move(gateOptions));

  const int port = gvirtus::testing::freePort();
  SupervisorOptions options;
  options.argv = {test::kFakeBackend, "--leak-clients", test::writeConfig(dir, port)};
  options.env = currentEnvironment();
  options.port = static_cast<uint16_t>(port);
  options.probeInterval = 50ms;
  options.startupTimeout = 10s;
  options.stopTimeout = 2s;
  options.backoffInitial = 100ms;
  options.backoffJitter = 0;
  options.maxLeakedSockets = 2;
  options.leakRestartPermit = [&gate](bool overLimit, bool idle) {
    return gate.permit(overLimit, idle);
  };
  Supervisor supervisor(std::move(options));
  supervisor.start();
  gate.start();
  REQUIRE(eventually([&] { return supervisor.status().listening; }, 10s));
  for (int i = 0; i < 3; ++i) {
    test::TcpClient finished(port);
  }
  REQUIRE(eventually([&] { return supervisor.status().leakedSockets == 3; }, 5s));

  // Due, with no other backend Ready: put off, looked at again, still not restarted.
  REQUIRE(eventually([&] { return gate.deferrals() >= 2; }, 10s));
  CHECK(supervisor.status().leakRestarts == 0);
  CHECK_FALSE(gate.draining());

  // Another is Ready: this one goes not ready first, and waits to be seen so.
  api.setReady("backend-1", true);
  REQUIRE(eventually([&] { return gate.draining(); }, 10s));
  CHECK(supervisor.status().leakRestarts == 0);
  api.setReady("backend-0", false);  // what the kubelet writes after the failed probes
  REQUIRE(eventually([&] { return supervisor.status().leakRestarts == 1; }, 10s));
  REQUIRE(eventually([&] { return supervisor.status().listening; }, 10s));
  CHECK(eventually([&] { return supervisor.status().leakedSockets == 0; }, 5s));
  CHECK_FALSE(gate.draining());
  CHECK(gate.permits() == 1);
  supervisor.stop();
  gate.stop();
}
