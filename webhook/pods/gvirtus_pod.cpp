#include "webhook/pods/gvirtus_pod.h"

#include <algorithm>

#include "common/base/json_access.h"
#include "common/contract/scheduling_gate.h"
#include "webhook/base/names.h"

namespace gvirtus::webhook {

using nlohmann::json;

namespace {

std::string stringOr(const json* value) {
  return value != nullptr && value->is_string() ? value->get<std::string>() : std::string();
}

}  // namespace

const std::vector<std::string_view>& GvirtusPod::keptAnnotations() {
  static const std::vector<std::string_view> kKept = {
      kBackendAnnotation,      kBackendPodAnnotation, kBackendGpuAnnotation,
      kAssignedByAnnotation,   kGpuMemoryAnnotation,  kKaiGpuFractionAnnotation,
      kKaiGpuMemoryAnnotation, kPodGroupAnnotation};
  return kKept;
}

std::shared_ptr<const std::string> StringPool::intern(const std::string& value) {
  // The pool's key is a second copy: a long value, which only a tenant's own annotation
  // would be, is not worth sharing and would be held twice.
  if (value.size() > kLongest) {
    return std::make_shared<const std::string>(value);
  }
  auto [it, added] = pool_.try_emplace(value);
  if (auto held = it->second.lock()) {
    return held;
  }
  auto made = std::make_shared<const std::string>(value);
  it->second = made;
  if (added && pool_.size() >= sweepAt_) {
    std::erase_if(pool_, [](const auto& entry) { return entry.second.expired(); });
    sweepAt_ = std::max<size_t>(1024, 2 * pool_.size());
  }
  return made;
}

GvirtusPod GvirtusPod::from(const json& kept, StringPool* pool) {
  GvirtusPod pod;
  const json* metadata = memberAt(kept, {"metadata"});
  if (metadata != nullptr && metadata->is_object()) {
    pod.ns = stringOr(member(*metadata, "namespace"));
    pod.name = stringOr(member(*metadata, "name"));
    pod.uid = stringOr(member(*metadata, "uid"));
    pod.resourceVersion = stringOr(member(*metadata, "resourceVersion"));
    pod.creationTimestamp = stringOr(member(*metadata, "creationTimestamp"));
    pod.deletionTimestamp = stringOr(member(*metadata, "deletionTimestamp"));
    pod.enabledLabel = stringOr(memberAt(*metadata, {"labels", kEnabledLabel}));
    if (const json* annotations = member(*metadata, "annotations");
        annotations != nullptr && annotations->is_object()) {
      const auto& keys = keptAnnotations();
      for (size_t i = 0; i < keys.size(); ++i) {
        if (auto it = annotations->find(keys[i]); it != annotations->end() && it->is_string()) {
          const auto& value = it->get_ref<const std::string&>();
          pod.annotations.emplace_back(
              static_cast<uint8_t>(i),
              pool != nullptr ? pool->intern(value) : std::make_shared<const std::string>(value));
        }
      }
    }
    if (const json* owners = member(*metadata, "ownerReferences")) {
      pod.owners = *owners;
    }
  }
  pod.gated = carriesBackendGate(kept);
  pod.phase = stringOr(memberAt(kept, {"status", "phase"}));
  pod.podIP = stringOr(memberAt(kept, {"status", "podIP"}));
  if (const json* ips = memberAt(kept, {"status", "podIPs"})) {
    pod.podIPs = *ips;
  }
  if (const json* conditions = memberAt(kept, {"status", "conditions"});
      conditions != nullptr && conditions->is_array() && !conditions->empty()) {
    pod.backendLost = stringOr(member(conditions->front(), "status"));
  }
  return pod;
}

json GvirtusPod::document() const {
  json metadata = json::object();
  auto put = [](json& into, const char* key, const std::string& value) {
    if (!value.empty()) {
      into[key] = value;
    }
  };
  put(metadata, "name", name);
  put(metadata, "namespace", ns);
  put(metadata, "uid", uid);
  put(metadata, "resourceVersion", resourceVersion);
  put(metadata, "creationTimestamp", creationTimestamp);
  put(metadata, "deletionTimestamp", deletionTimestamp);
  if (!enabledLabel.empty()) {
    metadata["labels"][kEnabledLabel] = enabledLabel;
  }
  for (const auto& [index, value] : annotations) {
    metadata["annotations"][std::string(keptAnnotations()[index])] = *value;
  }
  if (!owners.is_null()) {
    metadata["ownerReferences"] = owners;
  }
  json kept = {{"metadata", std::move(metadata)}};
  if (gated) {
    addBackendGate(kept);
  }
  put(kept["status"], "phase", phase);
  put(kept["status"], "podIP", podIP);
  if (!backendLost.empty()) {
    kept["status"]["conditions"] =
        json::array({{{"type", names::kBackendLostCondition}, {"status", backendLost}}});
  }
  if (!podIPs.is_null()) {
    kept["status"]["podIPs"] = podIPs;
  }
  if (kept["status"].empty()) {
    kept.erase("status");
  }
  return kept;
}

const std::string* GvirtusPod::annotation(std::string_view key) const {
  for (const auto& [index, value] : annotations) {
    if (keptAnnotations()[index] == key) {
      return value.get();
    }
  }
  return nullptr;
}

std::string GvirtusPod::annotationOr(std::string_view key, std::string otherwise) const {
  const std::string* value = annotation(key);
  return value != nullptr ? *value : std::move(otherwise);
}

}  // namespace gvirtus::webhook
