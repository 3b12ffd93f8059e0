#pragma once

#include "common/contract/pod_status.h"  // podIpv4(), which callers of these read with them

#include <nlohmann/json.hpp>
#include <string>

#include "common/cache/resource_cache.h"

// What the webhook reads of pods it holds in watch caches, and keeps of them.
namespace gvirtus::webhook {

// What the cache of GVirtuS pods keeps of each (ResourceCacheOptions::transform): what
// heldShare() (common/contract/gpu_share.h), assignedPod() (webhook/placement/cluster_source.h),
// peerClaim() (webhook/peers/backend_peers.h) and the waiting-pod controller's gang count read,
// and no more: the cache holds every GVirtuS pod of the cluster.
nlohmann::json frontendFields(nlohmann::json pod);

// How the webhook lists and watches every GVirtuS pod: frontendFields() of each, which a
// GvirtusPodStore (webhook/pods/gvirtus_pod_store.h) holds as records and the cache does not.
ResourceCacheOptions gvirtusPodOptions();

// What the waiting-pod controller's cache keeps of a waiting pod: what its release reads
// (requirementsFromPod(), gatedByWebhook(), the gang, the reporter) and what its patch
// writes (releasePatch()): the metadata but managedFields, and of the spec the node
// selector, the affinity, the scheduling gates and the webhook's own volume. A patch made
// from this is the one made from the whole pod. 10,000 waiting pods were held whole.
nlohmann::json waitingFields(nlohmann::json pod);

}  // namespace gvirtus::webhook
