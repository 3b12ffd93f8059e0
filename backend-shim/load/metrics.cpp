#include "backend-shim/load/metrics.h"

#include <string>

namespace gvirtus::backend_shim {

ShimMetrics::ShimMetrics(MetricsRegistry& registry, int maxSessions)
    : gpuMemoryTotal_(registry.gaugeFamily("gvirtus_gpu_memory_total_bytes",
                                           "Memory of each GPU, as NVML reports it.", {"gpu"})),
      gpuMemoryUsed_(registry.gaugeFamily("gvirtus_gpu_memory_used_bytes",
                                          "Memory in use on each GPU, as NVML reports it.",
                                          {"gpu"})),
      gpuUtilization_(registry.gaugeFamily(
          "gvirtus_gpu_utilization_ratio",
          "Fraction of NVML's last sample period during which each GPU was busy (0 to 1).",
          {"gpu"})),
      up_(registry.gauge("gvirtus_backend_up",
                         "1 when the GVirtuS backend process runs and its port is listening.")),
      ready_(registry.gauge("gvirtus_backend_ready",
                            "1 when the shim reports ready: the backend is up and the shim is "
                            "not draining.")),
      running_(registry.gauge("gvirtus_backend_process_running",
                              "1 when the backend process (its group's leader) is alive, "
                              "listening or not.")),
      connections_(
          registry.gauge("gvirtus_backend_connections",
                         "Sessions: the pods served, one process each (--sessions=per-pod), or "
                         "the ESTABLISHED TCP connections on the port (shared).")),
      gpus_(registry.gauge("gvirtus_gpus", "GPUs NVML reports on this node (0 without NVML).")),
      leakedSockets_(registry.gauge(
          "gvirtus_backend_leaked_sockets",
          "Sockets on the backend's port left in CLOSE_WAIT by finished clients (GVirtuS "
          "never closes them; each holds a file descriptor).")),
      restarts_(registry.counter("gvirtus_backend_restarts_total",
                                 "Times the backend was started again after its first start.")),
      leakRestarts_(registry.counter(
          "gvirtus_backend_leak_restarts_total",
          "Restarts of an idle backend to free leaked sockets (--max-leaked-sockets); also "
          "counted in gvirtus_backend_restarts_total.")),
      leakRestartsDeferred_(registry.counter(
          "gvirtus_backend_leak_restarts_deferred_total",
          "Looks that put a due leak restart off because no other backend pod was Ready (or "
          "none could be read): backends never all restart together "
          "(--leak-restart-max-defer).")),
      portWaiting_(registry.gauge(
          "gvirtus_backend_port_waiting",
          "1 while a start of the backend waits for its port to be free: old connections "
          "linger on it (TIME_WAIT, FIN_WAIT2, LAST_ACK) and the backend would fail to bind.")),
      portWaits_(registry.counter("gvirtus_backend_port_waits_total",
                                  "Starts of the backend that had to wait for its port.")),
      portWaitSeconds_(registry.counter(
          "gvirtus_backend_port_wait_seconds_total",
          "Time starts of the backend spent waiting for its port, the wait now included.")),
      sessionsAllowed_(registry.counter(
          "gvirtus_backend_sessions_allowed_total",
          "Connections to the backend's port the peer check let through: their address is "
          "listed in this pod's gvirtus.io/peers (--peer-check).")),
      sessionsRefused_(registry.counter(
          "gvirtus_backend_sessions_refused_total",
          "Connections to the backend's port the peer check closed before the backend read "
          "them: their address was not listed in gvirtus.io/peers within --peer-wait, or the "
          "check could not tell (--peer-check).")),
      peers_(registry.gauge("gvirtus_backend_peers",
                            "Addresses in this pod's gvirtus.io/peers annotation as last read "
                            "(--peer-check).")),
      refusals_(registry.counterFamily(
          "gvirtus_backend_session_refusals_total",
          "Connections the shim closed at accept with --sessions=per-pod, by reason: "
          "max-sessions, max-connections-per-pod, not-a-peer, draining, gate (no answer), "
          "pending (too many waiting for the gate), start (no process), handoff.",
          {"reason"})) {
  registry.gauge("gvirtus_backend_max_sessions", "Connections this backend takes (--max-sessions).")
      .set(maxSessions);
}

void ShimMetrics::observeBackend(const SupervisorStatus& status, bool ready) {
  up_.set(status.running && status.listening ? 1 : 0);
  ready_.set(ready ? 1 : 0);
  running_.set(status.running ? 1 : 0);
  connections_.set(status.connections);
  leakedSockets_.set(status.leakedSockets);
  if (status.leakRestarts > leakRestartsSeen_) {
    leakRestarts_.inc(static_cast<double>(status.leakRestarts - leakRestartsSeen_));
    leakRestartsSeen_ = status.leakRestarts;
  }
  portWaiting_.set(status.portWaiting ? 1 : 0);
  if (status.portWaits > portWaitsSeen_) {
    portWaits_.inc(static_cast<double>(status.portWaits - portWaitsSeen_));
    portWaitsSeen_ = status.portWaits;
  }
  if (status.portWaitSeconds > portWaitSecondsSeen_) {
    portWaitSeconds_.inc(status.portWaitSeconds - portWaitSecondsSeen_);
    portWaitSecondsSeen_ = status.portWaitSeconds;
  }
  if (status.restarts > restartsSeen_) {
    restarts_.inc(static_cast<double>(status.restarts - restartsSeen_));
    restartsSeen_ = status.restarts;
  }
}

void ShimMetrics::observeSession(bool allowed) {
  (allowed ? sessionsAllowed_ : sessionsRefused_).inc();
}

void ShimMetrics::observePeers(size_t peers) {
  peers_.set(static_cast<double>(peers));
}

void ShimMetrics::observeLeakRestartDeferred() {
  leakRestartsDeferred_.inc();
}

void ShimMetrics::observeGpus(const std::vector<GpuInfo>& gpus) {
  gpus_.set(static_cast<double>(gpus.size()));
  for (const auto& gpu : gpus) {
    const std::vector<std::string> labels{std::to_string(gpu.index)};
    gpuMemoryTotal_.withLabels(labels).set(static_cast<double>(gpu.memoryTotalBytes));
    gpuMemoryUsed_.withLabels(labels).set(static_cast<double>(gpu.memoryUsedBytes));
    gpuUtilization_.withLabels(labels).set(gpu.utilizationPercent / 100.0);
  }
}

void ShimMetrics::observeRefusal(const char* kind) {
  refusals_.withLabels({kind}).inc();
}

}  // namespace gvirtus::backend_shim
