#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/base/error.h"

namespace gvirtus {

// How the webhook picks a backend (--policy, or a pod's gvirtus.io/backend-policy).
enum class Policy { LeastConnections, RoundRobin, Random, SameZone };

Result<Policy> parsePolicy(std::string_view text);
std::string_view policyName(Policy policy);

// What one pod asks of its backend.
struct BackendRequirements {
  std::optional<int64_t> gpuMemoryMiB;  // gvirtus.io/gpu-memory: free memory on one GPU
  std::optional<int64_t> gpus;          // gvirtus.io/gpus: GPUs on the backend
  // KAI-Scheduler's gpu-fraction (0 < f <= 1) and gpu-memory (MiB): the pod's share of
  // one GPU, which must be free on one GPU of the backend and counts against it.
  std::optional<double> gpuFraction;
  std::optional<int64_t> kaiGpuMemoryMiB;
  std::optional<Policy> policy;  // gvirtus.io/backend-policy
  // The zone the pod already asks for in its nodeSelector (for same-zone); empty if none.
  std::string zone;
  // "namespace/name" of the asking pod; empty while it has no name yet (a pod created with
  // generateName, at admission).
  std::string pod;

  bool operator==(const BackendRequirements&) const = default;
  auto operator<=>(const BackendRequirements&) const = default;  // a map key
};

// The free memory one GPU of `totalMiB` must have for the pod: the largest of
// gvirtus.io/gpu-memory, KAI gpu-memory and KAI gpu-fraction of the total (rounded up);
// 0 when the pod asks for none.
int64_t memoryDemandMiB(const BackendRequirements& pod, int64_t totalMiB);
// True when the pod asks for GPU memory in any of those ways.
bool asksForGpuMemory(const BackendRequirements& pod);

// Reads the pod's annotations and node selector. An annotation that does not parse is an
// error naming it and quoting its value.
Result<BackendRequirements> requirementsFromPod(const nlohmann::json& pod);

}  // namespace gvirtus
