#pragma once

#include <cstdint>

#include "common/kube/api/resource.h"

// Names of the DRA driver gpu.gvirtus.io (docs/dra.md) that the webhook, which publishes the
// devices, and the device plugin, which prepares the claims allocated from them, share.
namespace gvirtus::dra {

inline constexpr const char* kDriver = "gpu.gvirtus.io";

// Device attributes (each under the driver's domain in a claim's CEL).
inline constexpr const char* kEndpointAttribute = "endpoint";
inline constexpr const char* kIpAttribute = "ip";
inline constexpr const char* kPortAttribute = "port";
inline constexpr const char* kIndexAttribute = "index";
inline constexpr const char* kBackendNamespaceAttribute = "backendNamespace";
inline constexpr const char* kBackendPodAttribute = "backendPod";

// The memory a claim that names none takes of a device (its capacity's requestPolicy
// default and least value): such a claim shares the GPU, it holds no share of it.
inline constexpr int64_t kLeastMemoryMiB = 1;

// The label on every ResourceSlice and DeviceTaintRule the webhook writes: what the webhook,
// and kubectl gvirtus, take for the webhook's own.
inline constexpr const char* kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr const char* kManagedBy = "gvirtus-webhook";

// The CDI kind of a prepared claim's device: "gvirtus.io/claim=<claim uid>".
inline constexpr const char* kClaimCdiKind = "gvirtus.io/claim";

inline const KubeResource kResourceSlices{"resource.k8s.io", "v1", "resourceslices", false};
inline const KubeResource kResourceClaims{"resource.k8s.io", "v1", "resourceclaims", true};
// Kubernetes 1.37 and later (DRADeviceTaintRules): cluster-scoped.
inline const KubeResource kDeviceTaintRules{"resource.k8s.io", "v1", "devicetaintrules", false};

}  // namespace gvirtus::dra
