#include "webhook/pods/pod_fields.h"

#include "common/base/json_access.h"
#include "common/contract/pod_origin.h"
#include "common/contract/scheduling_gate.h"
#include "common/net/ipv4_resolver.h"
#include "webhook/base/names.h"
#include "webhook/pods/backend_loss.h"
#include "webhook/pods/gvirtus_pod.h"

namespace gvirtus::webhook {

using nlohmann::json;

json frontendFields(json pod) {
  json kept = {{"metadata", json::object()}};
  json& metadata = kept["metadata"];
  for (const char* key :
       {"name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"}) {
    if (const json* value = memberAt(pod, {"metadata", key})) {
      metadata[key] = *value;
    }
  }
  // Neither a mirror pod (a kubelet's own: admission never saw it) nor a host-network pod
  // (admission refuses it; its address is every process of its node) was wired by the
  // webhook, whatever it carries: kept without label and annotations, it holds no share,
  // no assignment, and is no backend's peer.
  if (isMirrorPod(pod) || usesHostNetwork(pod)) {
    return kept;
  }
  // The cache lists by this label, but peerClaim() checks it itself: only what the label
  // lets in was wired by the webhook.
  if (const json* enabled = memberAt(pod, {"metadata", "labels", kEnabledLabel})) {
    metadata["labels"][std::string(kEnabledLabel)] = *enabled;
  }
  if (const json* annotations = memberAt(pod, {"metadata", "annotations"});
      annotations != nullptr && annotations->is_object()) {
    for (std::string_view key : GvirtusPod::keptAnnotations()) {
      if (auto it = annotations->find(key); it != annotations->end()) {
        metadata["annotations"][std::string(key)] = *it;
      }
    }
  }
  // Of the owners only one that replaces its pods, whom the backend follower asks for a new
  // pod.
  if (json owners = compactOwners(pod); !owners.is_null()) {
    metadata["ownerReferences"] = std::move(owners);
  }
  // Of the scheduling gates only ours, and only while the pod carries it (a waiting pod is
  // no peer of its backend yet): most pods are released and keep none.
  if (carriesBackendGate(pod)) {
    addBackendGate(kept);
  }
  for (const char* key : {"phase", "podIP"}) {
    if (const json* value = memberAt(pod, {"status", key})) {
      kept["status"][key] = *value;
    }
  }
  // Of the conditions only the backend follower's, which it sets once.
  if (const json* conditions = memberAt(pod, {"status", "conditions"});
      conditions != nullptr && conditions->is_array()) {
    for (const auto& condition : *conditions) {
      if (stringAt(condition, {"type"}) == names::kBackendLostCondition) {
        kept["status"]["conditions"] = json::array({{{"type", names::kBackendLostCondition},
                                                     {"status", stringAt(condition, {"status"})}}});
        break;
      }
    }
  }
  // podIPs only where podIP is not the IPv4 address (IPv6-first dual stack): podIpv4()
  // reads the same from what is kept, and a single-stack pod keeps one address.
  if (!isDottedIpv4(stringAt(pod, {"status", "podIP"}))) {
    if (const json* ips = memberAt(pod, {"status", "podIPs"})) {
      kept["status"]["podIPs"] = *ips;
    }
  }
  return kept;
}

ResourceCacheOptions gvirtusPodOptions() {
  ResourceCacheOptions options;
  options.transform = frontendFields;
  options.holdObjects = false;
  return options;
}

json waitingFields(json pod) {
  json kept = json::object();
  if (auto metadata = pod.is_object() ? pod.find("metadata") : pod.end();
      metadata != pod.end() && metadata->is_object()) {
    metadata->erase("managedFields");
    kept["metadata"] = std::move(*metadata);
  }
  json spec = json::object();
  // Whole, each of them: the release writes the gates and the affinity, and a changed
  // array or a map that lost a key is written whole (JsonPatch::between).
  for (const char* key : {"nodeSelector", "affinity", "schedulingGates"}) {
    if (const json* value = memberAt(pod, {"spec", key})) {
      spec[key] = *value;
    }
  }
  // Of the volumes only the webhook's own, which tells a pod it wired (gatedByWebhook()).
  if (const json* volumes = memberAt(pod, {"spec", "volumes"});
      volumes != nullptr && volumes->is_array()) {
    for (const auto& volume : *volumes) {
      if (stringAt(volume, {"name"}) == kConfigVolume) {
        spec["volumes"] = json::array({volume});
        break;
      }
    }
  }
  kept["spec"] = std::move(spec);
  if (const std::string phase = stringAt(pod, {"status", "phase"}); !phase.empty()) {
    kept["status"] = {{"phase", phase}};
  }
  return kept;
}

}  // namespace gvirtus::webhook
