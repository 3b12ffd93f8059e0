#include "common/contract/scheduling_gate.h"

#include <algorithm>
#include <string>

#include "common/base/json_access.h"
#include "common/contract/labels.h"

namespace gvirtus {
namespace {

using nlohmann::json;

bool isBackendGate(const json& gate) {
  return stringAt(gate, {"name"}) == names::kSchedulingGate;
}

}  // namespace

std::optional<size_t> backendGateIndex(const json& pod) {
  const json* gates = memberAt(pod, {"spec", "schedulingGates"});
  if (gates == nullptr || !gates->is_array()) {
    return std::nullopt;
  }
  auto found = std::ranges::find_if(*gates, isBackendGate);
  if (found == gates->end()) {
    return std::nullopt;
  }
  return static_cast<size_t>(std::distance(gates->begin(), found));
}

void addBackendGate(json& pod) {
  if (!carriesBackendGate(pod)) {
    arrayAt(pod, {"spec", "schedulingGates"}).push_back({{"name", names::kSchedulingGate}});
  }
}

void removeBackendGate(json& pod, bool dropEmpty) {
  if (!carriesBackendGate(pod)) {
    return;
  }
  json& spec = pod["spec"];
  json& gates = spec["schedulingGates"];
  std::erase_if(gates.get_ref<json::array_t&>(), isBackendGate);
  if (dropEmpty && gates.empty()) {
    spec.erase("schedulingGates");
  }
}

}  // namespace gvirtus
