#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kubectl-gvirtus/pod_facts.h"

// Lost backends whose devices the webhook's leader tainted (Kubernetes 1.37, docs/dra.md,
// "When a backend goes"): one DeviceTaintRule per backend pod, and kube-controller-manager
// evicts the pods whose claims do not tolerate the taint. The rule's status says how far
// that eviction is.
namespace gvirtus::kubectl_gvirtus {

struct TaintedView {
  std::string rule;
  std::string backendPod;                   // "namespace/name"
  std::string taint;                        // "key=value:effect"
  std::optional<std::chrono::seconds> age;  // since the taint was added
  // kube-controller-manager's condition EvictionInProgress: "REASON: message", or "-".
  std::string eviction;
};

// The rules of ours among `rules` (label app.kubernetes.io/managed-by=gvirtus-webhook, on
// devices of gpu.gvirtus.io), oldest first.
std::vector<TaintedView> taintedViews(const std::vector<nlohmann::json>& rules, TimePoint now);

}  // namespace gvirtus::kubectl_gvirtus
