#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

// Which pods a DRA claim lets connect to which backend pods (docs/dra.md): a pod that
// kube-scheduler reserved a claim for, when that claim was allocated a device of
// gpu.gvirtus.io, is a peer of the backend pod that device belongs to. Read from what only
// the scheduler writes (the claim's status: its allocation and reservedFor) and from the
// pod's own status (its UID and address): nothing a tenant writes in its claims or pods.
namespace gvirtus {
class ObjectCache;
}

namespace gvirtus::webhook {

// The caches a claimant's decisions read (the peer publisher's, the backend follower's).
struct ClaimantCaches {
  // Claims kept by isGvirtusClaim(), compactClaim() enough; all namespaces.
  ObjectCache* claims = nullptr;
  // Pods labelled gvirtus.io/dra=true kept by usesClaims(), compactClaimant() enough; all
  // namespaces.
  ObjectCache* pods = nullptr;
};

// A pod the claim is reserved for: always in the claim's namespace.
struct ClaimReservation {
  std::string pod;
  std::string uid;

  bool operator==(const ClaimReservation&) const = default;
};

struct ClaimPeers {
  // Backend pods ("namespace/name") the claim's devices of our driver belong to: the pool
  // names its backend pod (webhook/dra/slice.h). A pool named otherwise (a backend pod's
  // name too long for a pool name) names none.
  std::vector<std::string> backendPods;
  std::vector<ClaimReservation> reservedFor;
  // By backend pod: the GPU memory the scheduler counted for the claim on that pod's devices,
  // the claimant's share there (its cap, webhook/peers/backend_peers.h). Only where every device of
  // the claim on that pod counted more than the least a claim takes (dra::kLeastMemoryMiB): a
  // claim that named no memory shares the GPU and is not capped.
  std::map<std::string, int64_t> memoryMiB;

  bool operator==(const ClaimPeers&) const = default;
};

// What `claim` (resource.k8s.io/v1) grants; empty lists when it is not allocated a device
// of ours or is reserved for no pod.
ClaimPeers claimPeers(const nlohmann::json& claim);

// Whether `pod` is one a claim's reservation may let in: it names the claim `claimName`
// itself (spec.resourceClaims[].resourceClaimName; the claim the controller made for it
// from a template: status.resourceClaimStatuses[].resourceClaimName; or the one
// kube-scheduler made for its extended resource:
// status.extendedResourceClaimStatus.resourceClaimName), so a reservation
// written by anyone but the scheduler cannot add a pod that never asked; and it does not
// share its node's network (its address would be the node's, which every process there has).
bool claimantUses(const nlohmann::json& pod, const std::string& claimName);

// Whether `pod` is the live pod `reservation` of the claim `claimName` names: the same UID,
// not finished, not being deleted, and claimantUses(). A pod made again under the name is
// another pod, which the scheduler has not reserved the claim for.
bool holdsReservation(const nlohmann::json& pod, const ClaimReservation& reservation,
                      const std::string& claimName);

// The names of the claims `pod` names (claimantUses()), each once.
std::vector<std::string> claimNames(const nlohmann::json& pod);

// The caches' filters and transforms (ResourceCacheOptions): a claim allocated a device of
// our driver, kept as its name, UID, version, the status fields claimPeers() reads and, for
// the claim binder, when it was allocated and its devices' conditions of our driver; a
// pod that uses a claim (names one, or was given one for an extended resource), kept as its name,
// UID, version, creation time, controlling owner, phase, addresses, host network, the claims it
// names, and its condition gvirtus.io/BackendLost (the backend follower's).
bool isGvirtusClaim(const nlohmann::json& claim);
nlohmann::json compactClaim(nlohmann::json claim);
bool usesClaims(const nlohmann::json& pod);
nlohmann::json compactClaimant(nlohmann::json pod);

}  // namespace gvirtus::webhook
