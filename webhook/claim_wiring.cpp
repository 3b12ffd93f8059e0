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
  for (json& entry : list) {
    if (stringAt(entry, {"name"}) == name) {
      return &entry;
    }
  }
  return nullptr;
}

// `object[key]` as an array: made when absent; an error when something else is there.
Result<json*> arrayAt(json& object, const char* key, const std::string& where) {
  json& value = object[key];
  if (value.is_null()) {
    value = json::array();
  }
  if (!value.is_array()) {
    return fail(where + " is not a list");
  }
  return &value;
}

}  // namespace

Result<void> wireClaim(json& pod, const std::string& claimTemplate) {
  auto containers = wiredContainers(pod);
  if (!containers) {
    return fail(containers.error());
  }
  json& spec = pod["spec"];
  auto claims = arrayAt(spec, "resourceClaims", "spec.resourceClaims");
  if (!claims) {
    return fail(claims.error());
  }
  if (json* own = named(**claims, kClaimEntryName); own != nullptr) {
    if (stringAt(*own, {"resourceClaimTemplateName"}) != claimTemplate) {
      return fail(std::string("spec.resourceClaims has an entry named ") + kClaimEntryName +
                  " that does not use ResourceClaimTemplate " + claimTemplate +
                  ": the GVirtuS webhook adds that entry; rename yours");
    }
  } else {
    (*claims)->push_back({{"name", kClaimEntryName}, {"resourceClaimTemplateName", claimTemplate}});
  }
  for (const WiredContainer& wired : *containers) {
    json& container = spec[wired.field][wired.index];
    const std::string where = "spec." + wired.field + "[" + wired.name + "].resources.claims";
    auto used = arrayAt(container["resources"], "claims", where);
    if (!used) {
      return fail(used.error());
    }
    if (named(**used, kClaimEntryName) == nullptr) {
      (*used)->push_back({{"name", kClaimEntryName}});
    }
  }
  pod["metadata"]["labels"][kDraLabel] = "true";
  // What the webhook path writes, left by the pod's author: other parts of the webhook
  // read them (peer lists, GPU shares, the waiting-pod controller's gate), so a pod whose
  // backend comes from its claim must not carry them.
  if (json* annotations = &pod["metadata"]["annotations"]; annotations->is_object()) {
    for (const char* key :
         {kBackendAnnotation, kBackendPodAnnotation, kBackendGpuAnnotation, kPropertiesAnnotation,
          kAssignedByAnnotation, kBackendStatusAnnotation}) {
      annotations->erase(key);
    }
    if (annotations->empty()) {
      pod["metadata"].erase("annotations");
    }
  } else {
    pod["metadata"].erase("annotations");
  }
  if (json* gates = &spec["schedulingGates"]; gates->is_array()) {
    gates->erase(std::remove_if(
                     gates->begin(), gates->end(),
                     [](const json& gate) { return stringAt(gate, {"name"}) == kSchedulingGate; }),
                 gates->end());
    if (gates->empty()) {
      spec.erase("schedulingGates");
    }
  } else {
    spec.erase("schedulingGates");
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
