#pragma once

#include <string>

namespace gvirtus {

// One kind of Kubernetes object, as the REST API addresses it.
struct KubeResource {
  std::string group;  // "" for the core group
  std::string version;
  std::string plural;
  bool namespaced = true;

  // /api/v1/namespaces/NS/pods or /apis/GROUP/VERSION/PLURAL; `ns` ignored when cluster-scoped
  // and meaning all namespaces when empty.
  std::string collectionPath(const std::string& ns = {}) const;
  std::string objectPath(const std::string& ns, const std::string& name) const;
};

namespace resources {
inline const KubeResource kPods{"", "v1", "pods", true};
inline const KubeResource kNodes{"", "v1", "nodes", false};
inline const KubeResource kNamespaces{"", "v1", "namespaces", false};
inline const KubeResource kSecrets{"", "v1", "secrets", true};
inline const KubeResource kConfigMaps{"", "v1", "configmaps", true};
inline const KubeResource kEvents{"", "v1", "events", true};
inline const KubeResource kServiceAccounts{"", "v1", "serviceaccounts", true};
inline const KubeResource kLeases{"coordination.k8s.io", "v1", "leases", true};
inline const KubeResource kMutatingWebhookConfigurations{"admissionregistration.k8s.io", "v1",
                                                         "mutatingwebhookconfigurations", false};
inline const KubeResource kStatefulSets{"apps", "v1", "statefulsets", true};
}  // namespace resources

}  // namespace gvirtus
