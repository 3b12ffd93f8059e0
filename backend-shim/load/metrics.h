#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend-shim/backend/supervisor.h"
#include "backend-shim/load/nvml_gpus.h"
#include "common/telemetry/metrics.h"

// The shim's metrics on /metrics: the backend's state, its connections and restarts, the
// node's GPUs, and the peer check's answers.
namespace gvirtus::backend_shim {

class ShimMetrics {
 public:
  // Registers every metric in `registry`, which must outlive this object.
  ShimMetrics(MetricsRegistry& registry, int maxSessions);

  void observeBackend(const SupervisorStatus& status, bool ready);
  void observeGpus(const std::vector<GpuInfo>& gpus);
  // One answer of the peer gate (--peer-check): a session allowed or refused.
  void observeSession(bool allowed);
  // Addresses in the peer list the gate holds now.
  void observePeers(size_t peers);
  // A connection refused at accept by --sessions=per-pod, by kind ("max-sessions",
  // "max-connections-per-pod", "not-a-peer", "draining", ...: a short fixed set).
  void observeRefusal(const char* kind);
  // A leak restart put off: no other backend pod was Ready (LeakRestartGate).
  void observeLeakRestartDeferred();

 private:
  GaugeFamily& gpuMemoryTotal_;
  GaugeFamily& gpuMemoryUsed_;
  GaugeFamily& gpuUtilization_;
  Gauge& up_;
  Gauge& ready_;
  Gauge& running_;
  Gauge& connections_;
  Gauge& gpus_;
  Gauge& leakedSockets_;
  Counter& restarts_;
  Counter& leakRestarts_;
  Counter& leakRestartsDeferred_;
  Gauge& portWaiting_;
  Counter& portWaits_;
  Counter& portWaitSeconds_;
  Counter& sessionsAllowed_;
  Counter& sessionsRefused_;
  Gauge& peers_;
  CounterFamily& refusals_;
  int64_t restartsSeen_ = 0;
  int64_t leakRestartsSeen_ = 0;
  int64_t portWaitsSeen_ = 0;
  double portWaitSecondsSeen_ = 0;
};

}  // namespace gvirtus::backend_shim
