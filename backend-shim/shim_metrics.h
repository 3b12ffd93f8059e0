#pragma once

#include <cstdint>
#include <vector>

#include "backend-shim/nvml_gpus.h"
#include "backend-shim/supervisor.h"
#include "common/metrics.h"

// The shim's metrics on /metrics: the backend's state, its connections and restarts, and
// the node's GPUs.
namespace gvirtus::backend_shim {

class ShimMetrics {
 public:
  // Registers every metric in `registry`, which must outlive this object.
  ShimMetrics(MetricsRegistry& registry, int maxSessions);

  void observeBackend(const SupervisorStatus& status, bool ready);
  void observeGpus(const std::vector<GpuInfo>& gpus);

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
  int64_t restartsSeen_ = 0;
  int64_t leakRestartsSeen_ = 0;
};

}  // namespace gvirtus::backend_shim
