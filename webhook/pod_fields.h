#pragma once

#include "common/pod_status.h"  // podIpv4(), which callers of these read with them

#include <nlohmann/json.hpp>
#include <string>

// What the webhook reads of pods it holds in watch caches, and keeps of them.
namespace gvirtus::webhook {

// What the cache of GVirtuS pods keeps of each (ResourceCacheOptions::transform): what
// heldShare() (common/gpu_share.h), assignedPod() (webhook/cluster_backend_source.h),
// peerClaim() (webhook/backend_peers.h) and the waiting-pod controller's gang count read,
// and no more: the cache holds every GVirtuS pod of the cluster.
nlohmann::json frontendFields(nlohmann::json pod);

// What the waiting-pod controller's cache keeps of a waiting pod: all of it but
// metadata.managedFields and its status beyond the phase. A release patch is computed
// against the whole metadata and spec (JsonPatch::between writes a changed map or array
// whole, so what it does not hold would be erased), but never against those: managedFields
// alone is often half of a pod, and 10,000 waiting pods were held whole before.
nlohmann::json waitingFields(nlohmann::json pod);

}  // namespace gvirtus::webhook
