#include "webhook/dra_slice.h"

#include <algorithm>
#include <cstdio>

#include "common/json_access.h"
#include "webhook/names.h"

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

json stringAttribute(const std::string& value) {
  return {{"string", value}};
}

json intAttribute(int64_t value) {
  return {{"int", value}};
}

json device(const Backend& backend, const GpuLoad& gpu, int64_t sessions) {
  json attributes = {{"backendNamespace", stringAttribute(backend.podNamespace)},
                     {"ip", stringAttribute(backend.ip)},
                     {"port", intAttribute(backend.port)},
                     {"endpoint", stringAttribute(backend.endpoint())},
                     {"index", intAttribute(gpu.index)}};
  // Names may be longer than an attribute's value may be: such a one is left out, and
  // the slice's own labels and name still say which backend it is.
  auto optional = [&](const char* name, const std::string& value) {
    if (!value.empty() && value.size() <= kMaxAttributeLength) {
      attributes[name] = stringAttribute(value);
    }
  };
  optional("backendPod", backend.podName);
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
              {"requestPolicy", {{"default", "1Mi"}, {"validRange", {{"min", "1Mi"}}}}}}},
            // Exactly one per claim: a session is one frontend connected.
            {"sessions",
             {{"value", std::to_string(sessions)},
              {"requestPolicy", {{"default", "1"}, {"validValues", json::array({"1"})}}}}}}}};
}

}  // namespace

std::string sliceName(const Backend& backend) {
  std::string name = "gvirtus-" + backend.podNamespace + "-" + backend.podName;
  if (name.size() <= kMaxNameLength) {
    return name;
  }
  const std::string hash = digest(name);
  name.resize(kMaxNameLength - hash.size() - 1);
  // A name must end in an alphanumeric: the hash does.
  return name + "-" + hash;
}

std::optional<json> resourceSliceFor(const Backend& backend, int64_t generation) {
  if (backend.draining || !backend.load) {
    return std::nullopt;
  }
  std::vector<const GpuLoad*> gpus;
  for (const auto& gpu : backend.load->gpus) {
    if (gpu.memoryTotalMiB > 0 && gpus.size() < kMaxSliceDevices) {
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
  }
  json spec = {
      {"driver", kDraDriver},
      {"pool", {{"name", backend.podNamespace + "/" + backend.podName}, {"resourceSliceCount", 1}}},
      {"nodeSelector",
       {{"nodeSelectorTerms",
         json::array(
             {{{"matchExpressions", json::array({{{"key", kFrontendAllowed},
                                                  {"operator", "In"},
                                                  {"values", json::array({"true"})}}})}}})}}},
      {"devices", std::move(devices)}};
  // Digested before the generation goes in: the same devices give the same digest.
  const std::string devicesDigest = digest(spec.dump());
  spec["pool"]["generation"] = generation;
  return json{{"apiVersion", "resource.k8s.io/v1"},
              {"kind", "ResourceSlice"},
              {"metadata",
               {{"name", sliceName(backend)},
                {"labels", {{"app.kubernetes.io/managed-by", "gvirtus-webhook"}}},
                {"annotations", {{kDevicesDigestAnnotation, devicesDigest}}}}},
              {"spec", std::move(spec)}};
}

std::string devicesDigest(const json& slice) {
  return stringAt(slice, {"metadata", "annotations", kDevicesDigestAnnotation});
}

}  // namespace gvirtus::webhook
