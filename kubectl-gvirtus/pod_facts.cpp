#include "kubectl-gvirtus/pod_facts.h"

#include <algorithm>

#include "common/base/json_access.h"
#include "common/contract/labels.h"
#include "common/contract/scheduling_gate.h"
#include "common/time/time_text.h"

namespace gvirtus::kubectl_gvirtus {

using nlohmann::json;

std::string annotationOf(const json& object, std::string_view key) {
  return stringAt(object, {"metadata", "annotations", key});
}

std::string labelOf(const json& object, std::string_view key) {
  return stringAt(object, {"metadata", "labels", key});
}

std::optional<TimePoint> timeAt(const json& object, std::initializer_list<std::string_view> path) {
  auto parsed = parseRfc3339(stringAt(object, path));
  return parsed ? std::optional(*parsed) : std::nullopt;
}

std::chrono::seconds since(std::optional<TimePoint> then, TimePoint now) {
  if (!then || *then > now) {
    return std::chrono::seconds(0);
  }
  return std::chrono::duration_cast<std::chrono::seconds>(now - *then);
}

bool isGated(const json& pod) {
  return carriesBackendGate(pod);
}

bool isDeleting(const json& pod) {
  return !stringAt(pod, {"metadata", "deletionTimestamp"}).empty();
}

std::string formatAge(std::chrono::seconds age) {
  const int64_t s = age.count();
  if (s < 120) {
    return std::to_string(s) + "s";
  }
  if (s < 2 * 3600) {
    return std::to_string(s / 60) + "m";
  }
  if (s < 2 * 86400) {
    return std::to_string(s / 3600) + "h";
  }
  return std::to_string(s / 86400) + "d";
}

}  // namespace gvirtus::kubectl_gvirtus
