#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/kube/client.h"

// A lost backend's devices, tainted for kube-controller-manager to evict the pods that use
// them (Kubernetes 1.37 and later; docs/dra.md, "When a backend goes"). One DeviceTaintRule
// (resource.k8s.io/v1, cluster-scoped) per lost backend pod selects every device of its
// pool, whether or not the pool's slice is still there: the slice is withdrawn when the
// backend goes, and a taint on it would go with it.
namespace gvirtus::webhook {

// The taint's key. A claim that tolerates it (exactly.tolerations) keeps its pod.
inline constexpr const char* kBackendLostTaintKey = "gpu.gvirtus.io/backend-lost";

// The rule's name for a backend pod ("namespace/name"): "gvirtus-lost-NAMESPACE-NAME",
// shortened with a digest where that is too long. Stable: the next leader finds it.
std::string lostRuleName(const std::string& backendPod);

// The rule that taints every device of `backendPod`'s pool NoExecute, with the taint's
// value `why` ("gone" or "not-ready"); labelled as the webhook's, annotated with the backend
// pod (gvirtus.io/backend-pod), which ruleBackendPod() reads back.
nlohmann::json lostBackendRule(const std::string& backendPod, const std::string& why);

// The backend pod a rule of ours taints; empty for any other rule.
std::string ruleBackendPod(const nlohmann::json& rule);

// Whether the follower may taint devices through `client`: the API server serves
// DeviceTaintRules (resource.k8s.io/v1: Kubernetes 1.37, where the eviction controller runs
// by default) and the account may list them. Says why not, for the log.
bool taintRulesUsable(KubeClient& client, std::string& whyNot);

}  // namespace gvirtus::webhook
