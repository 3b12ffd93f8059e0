#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/kube_client.h"
#include "common/resource_cache.h"
#include "webhook/backend_source.h"

namespace gvirtus::webhook {

// The backend a backend pod offers, or nullopt when it cannot take frontends: not Ready,
// no IPv4 pod IP, being deleted. `node` (the pod's Node, when known) gives the zone; the
// gvirtus.io/load annotation gives the load (absent or unreadable: unknown).
std::optional<Backend> backendFromPod(const nlohmann::json& pod,
                                      const std::optional<nlohmann::json>& node, int port);

// Backend pods in one namespace matching a label selector, from a watch cache of those
// pods and one of the nodes (for their zones).
class ClusterBackendSource : public BackendSource {
 public:
  ClusterBackendSource(KubeClient& client, std::string ns, std::string labelSelector, int port);
  ~ClusterBackendSource() override;

  void setOnChange(std::function<void()> onChange) override;
  void start() override;
  void stop() override;
  bool ready() const override;
  std::vector<Backend> backends() const override;

 private:
  const int port_;
  std::function<void()> onChange_;
  std::unique_ptr<ResourceCache> nodes_;
  std::unique_ptr<ResourceCache> pods_;
};

}  // namespace gvirtus::webhook
