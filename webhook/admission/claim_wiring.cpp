#include "webhook/admission/claim_wiring.h"

#include <algorithm>

#include "common/base/json_access.h"
#include "common/contract/scheduling_gate.h"
#include "webhook/base/names.h"
#include "webhook/pods/pod_wiring.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// The entry of `list` (an array of objects) whose "name" is `name`; null when none.
json* named(json& list, const std::string& name) {
  auto found = std::find_if(list.begin(), list.end(),
                            [&](const json& entry) { return stringAt(entry, {"name"}) == name; });
  return found == list.end() ? nullptr : &*found;
}

// What the webhook path writes, left by the pod's author: other parts of the webhook read
// them (peer lists, GPU shares, the waiting-pod controller's gate), so a pod whose backend
// comes from its claim must not carry them.
void markClaimant(json& pod) {
  objectAt(pod, {"metadata", "labels"})[kDraLabel] = "true";
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
  removeBackendGate(pod, true);
}

// One container's limit or request of a resource.
struct ResourceAsk {
  std::string container;
  const json* quantity;
};

// Every limit and request of `resource` in the pod's init containers and containers.
std::vector<ResourceAsk> resourceAsks(const json& pod, const std::string& resource) {
  std::vector<ResourceAsk> asks;
  for (const char* list : {"initContainers", "containers"}) {
    const json* containers = memberAt(pod, {"spec", list});
    for (size_t i = 0; containers != nullptr && containers->is_array() && i < containers->size();
         ++i) {
      for (const char* kind : {"limits", "requests"}) {
        if (const json* quantity = memberAt((*containers)[i], {"resources", kind, resource})) {
          asks.push_back({stringAt((*containers)[i], {"name"}), quantity});
        }
      }
    }
  }
  return asks;
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
  markClaimant(pod);
  return {};
}

bool asksForResource(const json& pod, const std::string& resource) {
  return !resourceAsks(pod, resource).empty();
}

Result<void> wireExtendedResource(json& pod, const std::string& resource) {
  std::vector<std::string> asking;
  for (const ResourceAsk& ask : resourceAsks(pod, resource)) {
    // Extended resources are whole numbers, validated only after admission: "1" is the
    // API's own spelling of one, 1 a client's.
    if (*ask.quantity != "1" && *ask.quantity != 1) {
      return fail("container " + ask.container + " asks for " + ask.quantity->dump() + " " +
                  resource + ": a GVirtuS frontend talks to one remote GPU; ask for 1");
    }
    if (std::find(asking.begin(), asking.end(), ask.container) == asking.end()) {
      asking.push_back(ask.container);
    }
  }
  if (asking.size() > 1) {
    return fail("containers " + asking[0] + " and " + asking[1] + " both ask for " + resource +
                ": each would get a remote GPU of its own, and a pod's GVirtuS frontend talks "
                "to one; ask for it in one container");
  }
  markClaimant(pod);
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
