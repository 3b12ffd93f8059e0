#include "webhook/dra/binding.h"

#include <algorithm>

#include "common/base/json_access.h"
#include "common/contract/dra_names.h"
#include "common/time/time_text.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

bool namesCondition(const json* list, const char* condition) {
  return list != nullptr && list->is_array() &&
         std::ranges::any_of(*list, [&](const json& entry) { return entry == condition; });
}

// The device's entry in the claim's status.devices (keyed by driver, pool, device and share),
// null when it has none.
const json* statusOf(const json& claim, const dra::AllocatedDevice& device) {
  const json* entries = memberAt(claim, {"status", "devices"});
  if (entries == nullptr || !entries->is_array()) {
    return nullptr;
  }
  for (const json& entry : *entries) {
    if (stringAt(entry, {"driver"}) == dra::kDriver && stringAt(entry, {"pool"}) == device.pool &&
        stringAt(entry, {"device"}) == device.device &&
        stringAt(entry, {"shareID"}) == device.shareId.value_or("")) {
      return &entry;
    }
  }
  return nullptr;
}

// Whether the binder answered for `device` already: either of its conditions is there,
// whatever its status.
bool answered(const json& claim, const dra::AllocatedDevice& device) {
  const json* entry = statusOf(claim, device);
  const json* conditions = entry != nullptr ? memberAt(*entry, {"conditions"}) : nullptr;
  if (conditions == nullptr || !conditions->is_array()) {
    return false;
  }
  return std::ranges::any_of(*conditions, [](const json& condition) {
    const std::string type = stringAt(condition, {"type"});
    return type == kBackendReadyCondition || type == kBackendRefusedCondition;
  });
}

}  // namespace

BindingWait bindingWait(const json& claim) {
  BindingWait wait;
  auto devices = dra::allocatedDevices(claim);
  const json* results = memberAt(claim, {"status", "allocation", "devices", "results"});
  if (!devices || results == nullptr || !results->is_array()) {
    return wait;
  }
  // allocatedDevices() keeps our driver's results in the allocation's order: the same walk
  // pairs each with its raw result.
  size_t ours = 0;
  for (const json& result : *results) {
    if (stringAt(result, {"driver"}) != dra::kDriver || ours >= devices->size()) {
      continue;
    }
    const dra::AllocatedDevice& device = (*devices)[ours++];
    if (namesCondition(memberAt(result, {"bindingConditions"}), kBackendReadyCondition) &&
        !answered(claim, device)) {
      wait.devices.push_back(device);
    }
  }
  if (!wait.devices.empty()) {
    if (auto at = parseRfc3339(stringAt(claim, {"status", "allocation", "allocationTimestamp"}))) {
      wait.allocatedAt = *at;
    }
  }
  return wait;
}

BindingDecision decideBinding(const Backend* backend, const std::optional<std::string>& noRoom,
                              Duration waited, Duration timeout) {
  if (backend == nullptr) {
    return {BindingAnswer::kRefuse, "BackendGone", "the device's backend pod is gone or not ready"};
  }
  if (backend->draining) {
    return {BindingAnswer::kRefuse, "BackendDraining",
            "the backend " + backend->podRef() + " is draining: it takes no new session"};
  }
  if (!noRoom) {
    return {BindingAnswer::kReady, "RoomForSession",
            "the backend " + backend->podRef() + " has room for one more session"};
  }
  if (waited >= timeout) {
    return {BindingAnswer::kRefuse, "BackendFull",
            "the backend " + backend->podRef() + " had no room for " + formatDuration(timeout) +
                ": " + *noRoom};
  }
  return {BindingAnswer::kWait, "BackendFull", *noRoom};
}

json bindingStatus(const json& claim, const std::vector<dra::AllocatedDevice>& devices,
                   const BindingDecision& decision, std::chrono::system_clock::time_point now) {
  const char* type =
      decision.answer == BindingAnswer::kReady ? kBackendReadyCondition : kBackendRefusedCondition;
  json entries = json::array();
  for (const auto& device : devices) {
    json entry = {{"driver", dra::kDriver},
                  {"pool", device.pool},
                  {"device", device.device},
                  {"conditions", json::array({{{"type", type},
                                               {"status", "True"},
                                               {"reason", decision.reason},
                                               {"message", decision.message},
                                               {"lastTransitionTime", formatRfc3339(now)}}})}};
    if (device.shareId) {
      entry["shareID"] = *device.shareId;
    }
    entries.push_back(std::move(entry));
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata",
           {{"name", stringAt(claim, {"metadata", "name"})},
            {"namespace", stringAt(claim, {"metadata", "namespace"})}}},
          {"status", {{"devices", std::move(entries)}}}};
}

void addBindingConditions(json& slice) {
  auto spec = slice.find("spec");
  if (spec == slice.end() || !spec->is_object() || !spec->contains("devices") ||
      !(*spec)["devices"].is_array()) {
    return;
  }
  for (json& device : (*spec)["devices"]) {
    device["bindingConditions"] = json::array({kBackendReadyCondition});
    device["bindingFailureConditions"] = json::array({kBackendRefusedCondition});
  }
}

}  // namespace gvirtus::webhook
