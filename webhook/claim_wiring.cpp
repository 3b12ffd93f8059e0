#include "webhook/claim_wiring.h"

#include <algorithm>

#include "common/json_access.h"
#include "webhook/names.h"
#include "webhook/pod_wiring.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// The entry of `list` (an array of objects) whose "name" is `name`; null when none.
json* named(json& list, const std::string& name) {
  auto found = std::find_if(list.begin(), list.end(),
                            [&](const json& entry) { return stringAt(entry, {"name"}) == name; });
  return found == list.end() ? nullptr : &*found;
}

}  // namespace

Result<void> wireClaim(json& pod, const std::string& claimTemplate) {
  auto containers = wiredContainers(pod);
  if (!containers) {
    return fail(containers.error());
  }
  json& claims = arrayAt(pod, {"spec", "resourceClaims"});
  if (const json* own = named(claims, kClaimEntryName); own != nullptr) {
    if (stringAt(*own, {"resourceClaimTemplateName"}) != claimTemplate) {
      return fail(std::string("spec.resourceClaims has an entry named ") + kClaimEntryName +
                  " that does not use ResourceClaimTemplate " + claimTemplate +
                  ": the GVirtuS webhook adds that entry; rename yours");
    }
  } else {
    claims.push_back({{"name", kClaimEntryName}, {"resourceClaimTemplateName", claimTemplate}});
  }
  for (const WiredContainer& wired : *containers) {
    json& used = arrayAt(pod["spec"][wired.field][wired.index], {"resources", "claims"});
    if (named(used, kClaimEntryName) == nullptr) {
      used.push_back({{"name", kClaimEntryName}});
    }
  }
  objectAt(pod, {"metadata", "labels"})[kDraLabel] = "true";
  // What the webhook path writes, left by the pod's author: other parts of the webhook
  // read them (peer lists, GPU shares, the waiting-pod controller's gate), so a pod whose
  // backend comes from its claim must not carry them.
  json& metadata = pod["metadata"];
  if (auto annotations = metadata.find("annotations");
      annotations != metadata.end() && annotations->is_object()) {
    for (const char* key :
         {kBackendAnnotation, kBackendPodAnnotation, kBackendGpuAnnotation, kPropertiesAnnotation,
          kAssignedByAnnotation, kBackendStatusAnnotation}) {
      annotations->erase(key);
    }
    if (annotations->empty()) {
      metadata.erase(annotations);
    }
  }
  json& spec = pod["spec"];
  if (auto gates = spec.find("schedulingGates"); gates != spec.end() && gates->is_array()) {
    std::erase_if(gates->get_ref<json::array_t&>(),
                  [](const json& gate) { return stringAt(gate, {"name"}) == kSchedulingGate; });
    if (gates->empty()) {
      spec.erase(gates);
    }
  }
  return {};
}

std::vector<std::string> ignoredOnClaimPath(const json& pod) {
  std::vector<std::string> ignored;
  for (const char* key : {kGpuMemoryAnnotation, kGpusAnnotation, kBackendPolicyAnnotation,
                          kBackendAnnotation, kKaiGpuFractionAnnotation, kKaiGpuMemoryAnnotation}) {
    if (memberAt(pod, {"metadata", "annotations", key}) != nullptr) {
      ignored.emplace_back(key);
    }
  }
  return ignored;
}

}  // namespace gvirtus::webhook
