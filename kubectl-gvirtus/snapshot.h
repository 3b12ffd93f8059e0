#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/kube/client.h"
#include "kubectl-gvirtus/options.h"

// The objects the plugin reads, in as few requests as it can: the backend pods, the
// GVirtuS pods of every namespace and the webhook's Events about them.
namespace gvirtus::kubectl_gvirtus {

struct Snapshot {
  std::vector<nlohmann::json> backendPods;
  std::vector<nlohmann::json> gvirtusPods;
  std::vector<nlohmann::json> events;
  // The webhook's DeviceTaintRules of lost backends; none where the API server serves no
  // DeviceTaintRules (before Kubernetes 1.37) or the user may not list them.
  std::vector<nlohmann::json> taintRules;
};

// For status and backends: the backends and all GVirtuS pods; `withEvents` adds the
// Events WaitingForBackend, BackendLost and BackendLostRecreated of every namespace, and
// the webhook's DeviceTaintRules.
Result<Snapshot> readCluster(KubeClient& client, const Options& options, bool withEvents);

// For why: the pod, and every Event about it.
struct PodSnapshot {
  nlohmann::json pod;
  std::vector<nlohmann::json> events;
};
Result<PodSnapshot> readPod(KubeClient& client, const std::string& ns, const std::string& name);

}  // namespace gvirtus::kubectl_gvirtus
