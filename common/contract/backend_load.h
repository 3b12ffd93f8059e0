#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/error.h"

// The backend's load, as its pod's gvirtus.io/load annotation carries it: the backend shim
// writes it, the webhook and kubectl-gvirtus read it.
namespace gvirtus {

// One GPU of a backend, as the backend shim measures it.
struct GpuLoad {
  int64_t index = 0;
  int64_t memoryTotalMiB = 0;
  int64_t memoryUsedMiB = 0;
  int64_t utilization = 0;  // percent
  // As NVML names them; empty when not known (an older shim, a driver without them).
  std::string uuid;
  std::string model;

  int64_t memoryFreeMiB() const { return memoryTotalMiB - memoryUsedMiB; }
  bool operator==(const GpuLoad&) const = default;
};

// The backend shim's `gvirtus.io/load` annotation:
// {"connections":3,"maxSessions":16,"gpus":[...],"updated":"2026-11-22T10:00:00Z"}.
struct BackendLoad {
  int64_t connections = 0;
  int64_t maxSessions = 0;  // 0: no limit
  std::vector<GpuLoad> gpus;
  std::optional<std::chrono::system_clock::time_point> updated;

  bool operator==(const BackendLoad&) const = default;
};

// Parses the annotation; unknown fields are ignored, wrong types and negative counts are
// errors.
Result<BackendLoad> parseBackendLoad(std::string_view annotation);

// The annotation's value, one line, keys in this order:
// {"connections":3,"maxSessions":16,"gpus":[{"index":0,"memoryTotalMiB":81920,
//  "memoryUsedMiB":1024,"utilization":12,"uuid":"GPU-...","model":"NVIDIA H100"}],
//  "updated":"2026-11-22T10:00:00Z"}
// without "updated" when the load has none, and without a GPU's "uuid" or "model" when empty.
std::string renderBackendLoad(const BackendLoad& load);

}  // namespace gvirtus
