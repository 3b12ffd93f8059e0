#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/kube_client.h"
#include "kubectl-gvirtus/options.h"

// The objects the plugin reads, in as few requests as it can: the backend pods, the
// GVirtuS pods of every namespace and the webhook's Events about them.
namespace gvirtus::kubectl_gvirtus {

struct Snapshot {
  std::vector<nlohmann::json> backendPods;
  std::vector<nlohmann::json> gvirtusPods;
  std::vector<nlohmann::json> events;
};

// For status and backends: the backends and all GVirtuS pods; `withEvents` adds the
// Events WaitingForBackend, BackendLost and BackendLostRecreated of every namespace.
Result<Snapshot> readCluster(KubeClient& client, const Options& options, bool withEvents);

// For why: the pod, and every Event about it.
struct PodSnapshot {
  nlohmann::json pod;
  std::vector<nlohmann::json> events;
};
Result<PodSnapshot> readPod(KubeClient& client, const std::string& ns, const std::string& name);

}  // namespace gvirtus::kubectl_gvirtus
