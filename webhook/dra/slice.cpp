#include "webhook/dra/slice.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <vector>

#include "common/base/json_access.h"
#include "common/contract/quantity.h"
#include "webhook/base/names.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// The API's limits on object names and on a string attribute's value.
constexpr size_t kMaxNameLength = 253;
constexpr size_t kMaxAttributeLength = 64;

// FNV-1a: a short, stable digest that keeps a shortened name unique.
std::string digest(const std::string& text) {
  uint64_t hash = 14695981039346656037ULL;
  for (unsigned char c : text) {
    hash = (hash ^ c) * 1099511628211ULL;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash));
  return out;
}

// `name` cut to `limit` with a digest of the whole at its end, so that two long names stay
// apart; a part of a DNS name must not end in "." or "-", so the cut does not either.
std::string shortened(const std::string& name, size_t limit) {
  const std::string hash = digest(name);
  std::string out = name.substr(0, limit - hash.size() - 1);
  while (!out.empty() && (out.back() == '.' || out.back() == '-')) {
    out.pop_back();
  }
  return out + "-" + hash;
}

// What a slice publishes, in one form whatever form the API server wrote its quantities
// back in ("80Gi" for "81920Mi"): the spec without the pool generation, each quantity
// as its number.
json canonicalSpec(const json& slice) {
  const json* found = memberAt(slice, {"spec"});
  json spec = found != nullptr ? *found : json::object();
  if (auto pool = spec.find("pool"); pool != spec.end() && pool->is_object()) {
    pool->erase("generation");
  }
  auto number = [](json& quantity) {
    if (quantity.is_string()) {
      if (auto parsed = parseQuantity(quantity.get<std::string>())) {
        quantity = *parsed;
      }
    }
  };
  if (auto devices = spec.find("devices"); devices != spec.end() && devices->is_array()) {
    for (auto& device : *devices) {
      // The API server stamps each taint with the time it was added.
      if (auto taints = device.find("taints"); taints != device.end() && taints->is_array()) {
        for (auto& taint : *taints) {
          taint.erase("timeAdded");
        }
      }
      if (auto capacity = device.find("capacity");
          capacity != device.end() && capacity->is_object()) {
        for (auto& [name, entry] : capacity->items()) {
          if (!entry.is_object()) {
            continue;
          }
          if (auto value = entry.find("value"); value != entry.end()) {
            number(*value);
          }
          if (auto policy = entry.find("requestPolicy");
              policy != entry.end() && policy->is_object()) {
            if (auto fallback = policy->find("default"); fallback != policy->end()) {
              number(*fallback);
            }
            if (auto values = policy->find("validValues");
                values != policy->end() && values->is_array()) {
              for (auto& value : *values) {
                number(value);
              }
            }
            if (auto range = policy->find("validRange");
                range != policy->end() && range->is_object()) {
              for (auto& [bound, value] : range->items()) {
                number(value);
              }
            }
          }
        }
      }
    }
  }
  return spec;
}

json stringAttribute(const std::string& value) {
  return {{"string", value}};
}

json intAttribute(int64_t value) {
  return {{"int", value}};
}

json device(const Backend& backend, const GpuLoad& gpu, int64_t sessions) {
  json attributes = {{dra::kBackendNamespaceAttribute, stringAttribute(backend.podNamespace)},
                     {dra::kIpAttribute, stringAttribute(backend.ip)},
                     {dra::kPortAttribute, intAttribute(backend.port)},
                     {dra::kEndpointAttribute, stringAttribute(backend.endpoint())},
                     {dra::kIndexAttribute, intAttribute(gpu.index)}};
  // Names may be longer than an attribute's value may be: such a one is left out, and
  // the slice's own labels and name still say which backend it is.
  auto optional = [&](const char* name, const std::string& value) {
    if (!value.empty() && value.size() <= kMaxAttributeLength) {
      attributes[name] = stringAttribute(value);
    }
  };
  optional(dra::kBackendPodAttribute, backend.podName);
  optional("node", backend.node);
  optional("zone", backend.zone);
  optional("uuid", gpu.uuid);
  optional("model", gpu.model);
  return {{"name", "gpu-" + std::to_string(gpu.index)},
          {"attributes", std::move(attributes)},
          {"allowMultipleAllocations", true},
          {"capacity",
           {// A claim that names no memory takes the least there is: it still counts as one
            // session, and the chooser's path treats such a pod the same.
            {"memory",
             {{"value", std::to_string(gpu.memoryTotalMiB) + "Mi"},
              {"requestPolicy",
               {{"default", std::to_string(dra::kLeastMemoryMiB) + "Mi"},
                {"validRange", {{"min", std::to_string(dra::kLeastMemoryMiB) + "Mi"}}}}}}},
            // Exactly one per claim: a session is one frontend connected.
            {"sessions",
             {{"value", std::to_string(sessions)},
              {"requestPolicy", {{"default", "1"}, {"validValues", json::array({"1"})}}}}}}}};
}

}  // namespace

std::string boundedName(const std::string& name) {
  return name.size() <= kMaxNameLength ? name : shortened(name, kMaxNameLength);
}

std::string sliceName(const Backend& backend) {
  return boundedName("gvirtus-" + backend.podNamespace + "-" + backend.podName);
}

std::optional<json> resourceSliceFor(const Backend& backend, int64_t generation,
                                     bool taintDraining) {
  if (!backend.load || (backend.draining && !taintDraining)) {
    return std::nullopt;
  }
  // A GPU index reported twice would name two devices alike, and the API refuses the whole
  // slice for it: the first stands. A backend that takes fewer sessions than it has GPUs
  // offers one GPU per session.
  const size_t most = backend.load->maxSessions > 0
                          ? std::min<size_t>(kMaxSliceDevices, backend.load->maxSessions)
                          : kMaxSliceDevices;
  std::vector<const GpuLoad*> gpus;
  std::set<int64_t> indexes;
  for (const auto& gpu : backend.load->gpus) {
    if (gpu.memoryTotalMiB > 0 && gpus.size() < most && indexes.insert(gpu.index).second) {
      gpus.push_back(&gpu);
    }
  }
  if (gpus.empty()) {
    return std::nullopt;
  }
  const int64_t count = static_cast<int64_t>(gpus.size());
  const int64_t sessions = backend.load->maxSessions > 0
                               ? std::max<int64_t>(1, backend.load->maxSessions / count)
                               : kUnlimitedSessions;
  json devices = json::array();
  for (const GpuLoad* gpu : gpus) {
    devices.push_back(device(backend, *gpu, sessions));
    if (backend.draining) {
      devices.back()["taints"] =
          json::array({{{"key", kBackendDrainingTaintKey}, {"effect", "NoSchedule"}}});
    }
  }
  std::string pool = backend.podNamespace + "/" + backend.podName;
  if (pool.size() > kMaxNameLength) {
    pool = sliceName(backend);
  }
  json spec = {{"driver", kDraDriver},
               {"pool", {{"name", std::move(pool)}, {"resourceSliceCount", 1}}},
               {"nodeSelector",
                {{"nodeSelectorTerms",
                  json::array({{{"matchExpressions",
                                 json::array({{{"key", kFrontendAllowed},
                                               {"operator", "In"},
                                               {"values", json::array({"true"})}}})}}})}}},
               {"devices", std::move(devices)}};
  spec["pool"]["generation"] = generation;
  return json{
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceSlice"},
      {"metadata", {{"name", sliceName(backend)}, {"labels", {{kManagedByLabel, kManagedBy}}}}},
      {"spec", std::move(spec)}};
}

SliceChange compareSlices(const json& held, const json& wanted) {
  // What the API server never lets change: only a new slice brings these.
  auto differs = [&](std::initializer_list<std::string_view> path) {
    const json* a = memberAt(held, path);
    const json* b = memberAt(wanted, path);
    return (a == nullptr) != (b == nullptr) || (a != nullptr && *a != *b);
  };
  if (differs({"spec", "driver"}) || differs({"spec", "pool", "name"}) ||
      differs({"spec", "nodeName"})) {
    return SliceChange::kReplace;
  }
  for (const char* selection : {"allNodes", "perDeviceNodeSelection"}) {
    if (memberAt(held, {"spec", selection}) != nullptr) {
      return SliceChange::kReplace;
    }
  }
  if (stringAt(held, {"metadata", "labels", kManagedByLabel}) != kManagedBy ||
      canonicalSpec(held) != canonicalSpec(wanted)) {
    return SliceChange::kUpdate;
  }
  return SliceChange::kNone;
}

}  // namespace gvirtus::webhook
