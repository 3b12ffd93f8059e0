#include "webhook/claim_wiring.h"

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
