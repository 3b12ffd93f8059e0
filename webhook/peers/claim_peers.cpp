#include "webhook/peers/claim_peers.h"

#include <algorithm>
#include <set>

#include "common/base/json_access.h"
#include "common/contract/dra_claim.h"
#include "common/contract/dra_names.h"
#include "common/contract/pod_origin.h"
#include "common/contract/pod_status.h"
#include "webhook/base/names.h"
#include "webhook/pods/backend_loss.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// Copies `path` of `from` into `to`, where `from` has it.
void copyAt(const json& from, json& to, std::initializer_list<std::string_view> path) {
  const json* value = memberAt(from, path);
  if (value == nullptr) {
    return;
  }
  json* target = &to;
  for (std::string_view part : path) {
    target = &(*target)[std::string(part)];
  }
  *target = *value;
}

json compactMetadata(const json& object) {
  json compact = json::object();
  for (const char* field : {"name", "namespace", "uid", "resourceVersion", "deletionTimestamp"}) {
    copyAt(object, compact, {"metadata", field});
  }
  return compact;
}

}  // namespace

ClaimPeers claimPeers(const json& claim) {
  ClaimPeers peers;
  auto devices = dra::allocatedDevices(claim);
  if (!devices) {
    return peers;
  }
  std::set<std::string> uncapped;  // backend pods with a device counted at the least
  for (const auto& device : *devices) {
    // "namespace/name": exactly one '/', both parts non-empty.
    const size_t slash = device.pool.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == device.pool.size() ||
        device.pool.find('/', slash + 1) != std::string::npos) {
      continue;
    }
    if (std::find(peers.backendPods.begin(), peers.backendPods.end(), device.pool) ==
        peers.backendPods.end()) {
      peers.backendPods.push_back(device.pool);
    }
    if (device.memoryMiB.value_or(0) > dra::kLeastMemoryMiB) {
      peers.memoryMiB[device.pool] += *device.memoryMiB;
    } else {
      uncapped.insert(device.pool);
    }
  }
  for (const auto& pool : uncapped) {
    peers.memoryMiB.erase(pool);
  }
  if (peers.backendPods.empty()) {
    return peers;
  }
  const json* reserved = memberAt(claim, {"status", "reservedFor"});
  if (reserved == nullptr || !reserved->is_array()) {
    return peers;
  }
  for (const json& consumer : *reserved) {
    // A pod is core group "" (left out) and resource "pods"; other consumers hold no address.
    if (stringAt(consumer, {"resource"}) != "pods" || !stringAt(consumer, {"apiGroup"}).empty()) {
      continue;
    }
    ClaimReservation reservation{stringAt(consumer, {"name"}), stringAt(consumer, {"uid"})};
    if (!reservation.pod.empty() && !reservation.uid.empty()) {
      peers.reservedFor.push_back(std::move(reservation));
    }
  }
  return peers;
}

bool claimantUses(const json& pod, const std::string& claimName) {
  if (usesHostNetwork(pod)) {
    return false;
  }
  const std::vector<std::string> named = claimNames(pod);
  return std::find(named.begin(), named.end(), claimName) != named.end();
}

bool holdsReservation(const json& pod, const ClaimReservation& reservation,
                      const std::string& claimName) {
  return stringAt(pod, {"metadata", "name"}) == reservation.pod &&
         stringAt(pod, {"metadata", "uid"}) == reservation.uid && !podFinished(pod) &&
         memberAt(pod, {"metadata", "deletionTimestamp"}) == nullptr &&
         claimantUses(pod, claimName);
}

std::vector<std::string> claimNames(const json& pod) {
  std::vector<std::string> names;
  for (auto path : {std::initializer_list<std::string_view>{"spec", "resourceClaims"},
                    std::initializer_list<std::string_view>{"status", "resourceClaimStatuses"}}) {
    const json* list = memberAt(pod, path);
    for (size_t i = 0; list != nullptr && list->is_array() && i < list->size(); ++i) {
      std::string name = stringAt((*list)[i], {"resourceClaimName"});
      if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) {
        names.push_back(std::move(name));
      }
    }
  }
  // The claim kube-scheduler made for the pod's extended resource (docs/dra.md): named in the
  // pod's status, which only the scheduler writes.
  std::string special =
      stringAt(pod, {"status", "extendedResourceClaimStatus", "resourceClaimName"});
  if (!special.empty() && std::find(names.begin(), names.end(), special) == names.end()) {
    names.push_back(std::move(special));
  }
  return names;
}

bool isGvirtusClaim(const json& claim) {
  auto devices = dra::allocatedDevices(claim);
  return devices && !devices->empty();
}

json compactClaim(json claim) {
  json compact = compactMetadata(claim);
  copyAt(claim, compact, {"status", "allocation", "devices", "results"});
  copyAt(claim, compact, {"status", "reservedFor"});
  // The claim binder's (webhook/dra/binding.h): when the scheduler allocated it, and the
  // conditions of this driver's devices, without what drivers report beside them.
  copyAt(claim, compact, {"status", "allocation", "allocationTimestamp"});
  if (const json* entries = memberAt(claim, {"status", "devices"});
      entries != nullptr && entries->is_array()) {
    json ours = json::array();
    for (const json& entry : *entries) {
      if (stringAt(entry, {"driver"}) != dra::kDriver) {
        continue;
      }
      json kept = json::object();
      for (const char* field : {"driver", "pool", "device", "shareID", "conditions"}) {
        copyAt(entry, kept, {field});
      }
      ours.push_back(std::move(kept));
    }
    if (!ours.empty()) {
      compact["status"]["devices"] = std::move(ours);
    }
  }
  return compact;
}

bool usesClaims(const json& pod) {
  const json* claims = memberAt(pod, {"spec", "resourceClaims"});
  return (claims != nullptr && claims->is_array() && !claims->empty()) ||
         !stringAt(pod, {"status", "extendedResourceClaimStatus", "resourceClaimName"}).empty();
}

json compactClaimant(json pod) {
  json compact = compactMetadata(pod);
  copyAt(pod, compact, {"metadata", "creationTimestamp"});
  // The backend follower's: the controlling owner (whether one replaces the pod), and its
  // own condition.
  if (json owners = compactOwners(pod); !owners.is_null()) {
    compact["metadata"]["ownerReferences"] = std::move(owners);
  }
  if (const json* lost = podCondition(pod, names::kBackendLostCondition); lost != nullptr) {
    compact["status"]["conditions"] = json::array({*lost});
  }
  for (const char* field : {"phase", "podIP", "podIPs"}) {
    copyAt(pod, compact, {"status", field});
  }
  copyAt(pod, compact, {"spec", "hostNetwork"});
  // Of the claims it names, only the names.
  auto claimNames = [&](std::initializer_list<std::string_view> path) {
    const json* list = memberAt(pod, path);
    if (list == nullptr || !list->is_array()) {
      return;
    }
    json names = json::array();
    for (const json& entry : *list) {
      if (auto name = stringAt(entry, {"resourceClaimName"}); !name.empty()) {
        names.push_back({{"resourceClaimName", name}});
      }
    }
    json* target = &compact;
    for (std::string_view part : path) {
      target = &(*target)[std::string(part)];
    }
    *target = std::move(names);
  };
  claimNames({"spec", "resourceClaims"});
  claimNames({"status", "resourceClaimStatuses"});
  copyAt(pod, compact, {"status", "extendedResourceClaimStatus", "resourceClaimName"});
  return compact;
}

}  // namespace gvirtus::webhook
