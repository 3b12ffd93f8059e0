#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>

// The scheduling gate gvirtus.io/backend (docs/pod-contract.md): a GVirtuS pod carries it
// while it waits for a backend, and kube-scheduler leaves it alone until the webhook takes
// it away. The one place that reads or writes it in a pod's spec.schedulingGates.
namespace gvirtus {

// Its index in spec.schedulingGates; none when the pod does not carry it.
std::optional<size_t> backendGateIndex(const nlohmann::json& pod);

inline bool carriesBackendGate(const nlohmann::json& pod) {
  return backendGateIndex(pod).has_value();
}

// Adds it once, after the pod's other gates.
void addBackendGate(nlohmann::json& pod);

// Takes it away and leaves the pod's other gates, in their order. With `dropEmpty`, a
// spec.schedulingGates left empty goes too; else it stays, as [].
void removeBackendGate(nlohmann::json& pod, bool dropEmpty);

}  // namespace gvirtus
