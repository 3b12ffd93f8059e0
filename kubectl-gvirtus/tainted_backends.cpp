#include "kubectl-gvirtus/tainted_backends.h"

#include <algorithm>

#include "common/base/json_access.h"
#include "common/contract/dra_names.h"
#include "common/contract/labels.h"

namespace gvirtus::kubectl_gvirtus {

using nlohmann::json;

std::vector<TaintedView> taintedViews(const std::vector<json>& rules, TimePoint now) {
  std::vector<std::pair<std::optional<TimePoint>, TaintedView>> ours;
  for (const json& rule : rules) {
    if (labelOf(rule, dra::kManagedByLabel) != dra::kManagedBy ||
        stringAt(rule, {"spec", "deviceSelector", "driver"}) != dra::kDriver) {
      continue;
    }
    TaintedView view;
    view.rule = stringAt(rule, {"metadata", "name"});
    view.backendPod = annotationOf(rule, names::kBackendPodAnnotation);
    const std::string value = stringAt(rule, {"spec", "taint", "value"});
    view.taint = stringAt(rule, {"spec", "taint", "key"}) + (value.empty() ? "" : "=" + value) +
                 ":" + stringAt(rule, {"spec", "taint", "effect"});
    const auto added = timeAt(rule, {"spec", "taint", "timeAdded"});
    if (added) {
      view.age = since(added, now);
    }
    view.eviction = "-";
    if (const json* conditions = memberAt(rule, {"status", "conditions"});
        conditions != nullptr && conditions->is_array()) {
      for (const json& condition : *conditions) {
        if (stringAt(condition, {"type"}) == "EvictionInProgress") {
          view.eviction = stringAt(condition, {"reason"}) + ": " + stringAt(condition, {"message"});
        }
      }
    }
    ours.emplace_back(added, std::move(view));
  }
  std::stable_sort(ours.begin(), ours.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<TaintedView> out;
  for (auto& [added, view] : ours) {
    out.push_back(std::move(view));
  }
  return out;
}

}  // namespace gvirtus::kubectl_gvirtus
