#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/base/error.h"

// The claim path of a GVirtuS pod (--dra-claim-template, docs/dra.md): instead of a backend
// chosen by the webhook, the pod gets a ResourceClaim made from the operator's template in
// its own namespace, which kube-scheduler allocates a backend GPU for and the device
// plugin's DRA driver prepares.
namespace gvirtus::webhook {

// The pod's claim entry (spec.resourceClaims[].name) that the webhook adds.
inline constexpr const char* kClaimEntryName = "gvirtus-gpu";

// Adds, where missing: spec.resourceClaims {name: gvirtus-gpu, resourceClaimTemplateName:
// `claimTemplate`}; resources.claims {name: gvirtus-gpu} in each wired container
// (wiredContainers()); the label gvirtus.io/dra=true, which the backends' NetworkPolicy and
// the webhook's peer publisher select. Removes what only the webhook path writes, were
// the pod's author to write it: the assignment annotations (gvirtus.io/backend,
// backend-pod, backend-gpu, properties, assigned-by, backend-status) and the scheduling
// gate gvirtus.io/backend. Errors (denials): an unknown container name in
// gvirtus.io/containers, or a claim entry gvirtus-gpu of the pod's own naming something
// else. Running it again changes nothing.
Result<void> wireClaim(nlohmann::json& pod, const std::string& claimTemplate);

// Whether a container or init container of the pod asks for the extended resource
// `resource` (limits or requests).
bool asksForResource(const nlohmann::json& pod, const std::string& resource);

// The extended-resource path (--dra-extended-resource, docs/dra.md): the pod asks for
// `resource`, which the DeviceClass gpu.gvirtus.io names, and kube-scheduler itself makes
// and allocates its claim. Adds the label gvirtus.io/dra=true and removes what wireClaim()
// removes; the pod is otherwise the author's. Errors (denials): a container asking for other
// than 1, or more than one container asking (each request is a device of its own, and a
// frontend talks to one backend). Running it again changes nothing.
Result<void> wireExtendedResource(nlohmann::json& pod, const std::string& resource);

// The pod's annotations that only the webhook's own choice of a backend reads
// (gvirtus.io/gpu-memory, gvirtus.io/gpus, gvirtus.io/backend-policy, gvirtus.io/backend,
// KAI's gpu-fraction and gpu-memory): on the claim path the template decides, so they are
// ignored, and the review warns.
std::vector<std::string> ignoredOnClaimPath(const nlohmann::json& pod);

}  // namespace gvirtus::webhook
