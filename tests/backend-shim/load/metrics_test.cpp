#include "backend-shim/load/metrics.h"

#include <catch2/catch.hpp>

using namespace gvirtus::backend_shim;

TEST_CASE("backend-shim shim_metrics: backend state, restarts and GPUs on /metrics",
          "[shim_metrics]") {
  gvirtus::MetricsRegistry registry;
  ShimMetrics metrics(registry, 16);
  SupervisorStatus status;
  status.running = true;
  status.listening = true;
  status.connections = 3;
  status.restarts = 2;
  metrics.observeBackend(status, true);
  metrics.observeGpus(
      {GpuInfo{0, 80ull << 30, 1ull << 30, 12, {}, {}}, GpuInfo{1, 80ull << 30, 0, 0, {}, {}}});
  std::string text = registry.render();
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_up 1\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_ready 1\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_connections 3\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_restarts_total 2\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_max_sessions 16\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_gpus 2\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_gpu_memory_total_bytes{gpu=\"0\"} 85899345920\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_gpu_memory_used_bytes{gpu=\"0\"} 1073741824\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_gpu_utilization_ratio{gpu=\"0\"} 0.12\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_gpu_utilization_ratio{gpu=\"1\"} 0\n"));
  CHECK_THAT(text, Catch::Contains("# TYPE gvirtus_backend_restarts_total counter\n"));

  // The listener is lost: down, not ready; restarts only go up.
  status.listening = false;
  status.restarts = 3;
  metrics.observeBackend(status, false);
  metrics.observeBackend(status, false);
  text = registry.render();
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_up 0\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_ready 0\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_restarts_total 3\n"));
}

TEST_CASE("backend-shim shim_metrics: the peer check's answers and list", "[shim_metrics]") {
  gvirtus::MetricsRegistry registry;
  ShimMetrics metrics(registry, 16);
  std::string text = registry.render();
  // Present from the start, at 0, with the check on or off.
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_sessions_allowed_total 0\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_sessions_refused_total 0\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_peers 0\n"));
  metrics.observeSession(true);
  metrics.observeSession(false);
  metrics.observeSession(false);
  metrics.observePeers(5);
  text = registry.render();
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_sessions_allowed_total 1\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_sessions_refused_total 2\n"));
  CHECK_THAT(text, Catch::Contains("# TYPE gvirtus_backend_sessions_refused_total counter\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_peers 5\n"));
}

TEST_CASE("backend-shim shim_metrics: the waits for the backend's port", "[shim_metrics]") {
  gvirtus::MetricsRegistry registry;
  ShimMetrics metrics(registry, 16);
  SupervisorStatus status;
  status.portWaiting = true;
  status.portWaits = 1;
  status.portWaitSeconds = 1.5;
  metrics.observeBackend(status, false);
  std::string text = registry.render();
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_port_waiting 1\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_port_waits_total 1\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_port_wait_seconds_total 1.5\n"));
  // The wait ends: the time goes on counting up to its end, the count stays.
  status.portWaiting = false;
  status.portWaitSeconds = 2.25;
  metrics.observeBackend(status, true);
  text = registry.render();
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_port_waiting 0\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_port_waits_total 1\n"));
  CHECK_THAT(text, Catch::Contains("gvirtus_backend_port_wait_seconds_total 2.25\n"));
}

TEST_CASE("backend-shim shim_metrics: leak restarts put off", "[shim_metrics]") {
  gvirtus::MetricsRegistry registry;
  ShimMetrics metrics(registry, 16);
  CHECK_THAT(registry.render(),
             Catch::Contains("gvirtus_backend_leak_restarts_deferred_total 0\n"));
  metrics.observeLeakRestartDeferred();
  metrics.observeLeakRestartDeferred();
  CHECK_THAT(registry.render(),
             Catch::Contains("gvirtus_backend_leak_restarts_deferred_total 2\n"));
}
