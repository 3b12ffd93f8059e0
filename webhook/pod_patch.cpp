#include "webhook/pod_patch.h"

#include <algorithm>

#include "common/json_access.h"
#include "webhook/names.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

std::string stringOf(const json* value) {
  return value != nullptr && value->is_string() ? value->get<std::string>() : std::string();
}

// The index of the first element of `array` whose "name" is `name`.
std::optional<size_t> findNamed(const json* array, std::string_view name) {
  if (array == nullptr || !array->is_array()) {
    return std::nullopt;
  }
  for (size_t i = 0; i < array->size(); ++i) {
    if (stringOf(member((*array)[i], "name")) == name) {
      return i;
    }
  }
  return std::nullopt;
}

std::vector<std::string> splitNames(const std::string& text) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) {
      comma = text.size();
    }
    std::string item = text.substr(start, comma - start);
    const auto first = item.find_first_not_of(" \t\r\n");
    if (first != std::string::npos) {
      item = item.substr(first, item.find_last_not_of(" \t\r\n") - first + 1);
      if (std::find(names.begin(), names.end(), item) == names.end()) {
        names.push_back(item);
      }
    }
    start = comma + 1;
  }
  return names;
}

std::string fieldPath() {
  return "metadata.annotations['" + std::string(kPropertiesAnnotation) + "']";
}

// The volume as the API server stores it (defaults written out), so that a reinvoked
// webhook finds it equal.
json configVolume() {
  return {{"name", kConfigVolume},
          {"downwardAPI",
           {{"defaultMode", 420},
            {"items",
             json::array({{{"path", kConfigFile},
                           {"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", fieldPath()}}}}})}}}};
}

// True when `volume` projects our annotation to properties.json, however it is written.
bool isConfigVolume(const json& volume) {
  const json* items = memberAt(volume, {"downwardAPI", "items"});
  if (items == nullptr || !items->is_array()) {
    return false;
  }
  return std::any_of(items->begin(), items->end(), [](const json& item) {
    return stringOf(member(item, "path")) == kConfigFile &&
           stringOf(memberAt(item, {"fieldRef", "fieldPath"})) == fieldPath();
  });
}

json configMount() {
  return {{"name", kConfigVolume}, {"mountPath", kConfigMountPath}, {"readOnly", true}};
}

// Arrays are written whole ("add" of the complete new array replaces the old one), never
// appended to with "-": every operation sets a value, so the patch applied twice changes
// nothing more.
json withAppended(const json* array, const json& item) {
  json out = array != nullptr && array->is_array() ? *array : json::array();
  out.push_back(item);
  return out;
}

void addVolume(const json& pod, JsonPatch& patch) {
  const json* volumes = memberAt(pod, {"spec", "volumes"});
  auto index = findNamed(volumes, kConfigVolume);
  if (!index) {
    patch.add(jsonPointer({"spec", "volumes"}), withAppended(volumes, configVolume()));
  } else if (!isConfigVolume((*volumes)[*index])) {
    patch.replace(jsonPointer({"spec", "volumes", std::to_string(*index)}), configVolume());
  }
}

Result<void> wireContainer(const json& pod, const WiredContainer& target, JsonPatch& patch) {
  const json& container = (*memberAt(pod, {"spec", target.field}))[target.index];
  const std::string base = jsonPointer({"spec", target.field, std::to_string(target.index)});

  const json* mounts = member(container, "volumeMounts");
  if (auto index = findNamed(mounts, kConfigVolume)) {
    const json& mount = (*mounts)[*index];
    if (stringOf(member(mount, "mountPath")) != kConfigMountPath ||
        member(mount, "readOnly") == nullptr || *member(mount, "readOnly") != true ||
        member(mount, "subPath") != nullptr) {
      patch.replace(base + "/volumeMounts/" + std::to_string(*index), configMount());
    }
  } else {
    if (mounts != nullptr && mounts->is_array()) {
      for (const auto& mount : *mounts) {
        if (stringOf(member(mount, "mountPath")) == kConfigMountPath) {
          return fail("container \"" + target.name + "\" already mounts volume \"" +
                      stringOf(member(mount, "name")) + "\" at " + std::string(kConfigMountPath));
        }
      }
    }
    patch.add(base + "/volumeMounts", withAppended(mounts, configMount()));
  }

  const json* env = member(container, "env");
  if (!findNamed(env, kConfigEnv)) {
    patch.add(base + "/env", withAppended(env, {{"name", kConfigEnv}, {"value", kConfigPath}}));
  }
  return {};
}

bool asksForGpu(const json& container) {
  for (const char* section : {"limits", "requests"}) {
    const json* map = memberAt(container, {"resources", section});
    if (map != nullptr && map->is_object() && map->contains(kGpuResource)) {
      return true;
    }
  }
  return false;
}

}  // namespace

Result<std::vector<WiredContainer>> wiredContainers(const json& pod) {
  const json* containers = memberAt(pod, {"spec", "containers"});
  if (containers == nullptr || !containers->is_array() || containers->empty()) {
    return fail("the pod has no containers");
  }
  const json* initContainers = memberAt(pod, {"spec", "initContainers"});
  const auto names =
      splitNames(stringOf(memberAt(pod, {"metadata", "annotations", kContainersAnnotation})));
  std::vector<WiredContainer> out;
  if (names.empty()) {
    for (size_t i = 0; i < containers->size(); ++i) {
      out.push_back({"containers", i, stringOf(member((*containers)[i], "name"))});
    }
    return out;
  }
  for (const auto& name : names) {
    if (!findNamed(containers, name) && !findNamed(initContainers, name)) {
      std::string known;
      for (const json* list : {containers, initContainers}) {
        for (size_t i = 0; list != nullptr && list->is_array() && i < list->size(); ++i) {
          known += (known.empty() ? "" : ", ") + stringOf(member((*list)[i], "name"));
        }
      }
      return fail("annotation " + std::string(kContainersAnnotation) + " names container \"" +
                  name + "\", which the pod does not have (it has: " + known + ")");
    }
  }
  for (const auto& [field, list] :
       {std::pair{"containers", containers}, std::pair{"initContainers", initContainers}}) {
    for (size_t i = 0; list != nullptr && list->is_array() && i < list->size(); ++i) {
      const std::string name = stringOf(member((*list)[i], "name"));
      if (std::find(names.begin(), names.end(), name) != names.end()) {
        out.push_back({field, i, name});
      }
    }
  }
  return out;
}

Result<JsonPatch> wiringPatch(const json& pod, const WiringOptions& options) {
  auto targets = wiredContainers(pod);
  if (!targets) {
    return fail(targets.error());
  }
  JsonPatch patch;
  addVolume(pod, patch);
  for (const auto& target : *targets) {
    if (auto ok = wireContainer(pod, target, patch); !ok) {
      return fail(ok.error());
    }
  }
  patch.setMapEntry(pod, {"spec", "nodeSelector"}, kFrontendNodeLabel, "true");
  if (options.addGpuLimit) {
    const bool asks = std::any_of(targets->begin(), targets->end(), [&](const auto& target) {
      return asksForGpu((*memberAt(pod, {"spec", target.field}))[target.index]);
    });
    if (!asks) {
      const auto& first = targets->front();
      patch.setMapEntry(pod,
                        {"spec", first.field, std::to_string(first.index), "resources", "limits"},
                        kGpuResource, "1");
    }
  }
  if (!options.schedulerName.empty()) {
    const std::string current = stringOf(memberAt(pod, {"spec", "schedulerName"}));
    if (current.empty() || current == "default-scheduler") {
      patch.setMapEntry(pod, {"spec"}, "schedulerName", options.schedulerName);
    }
  }
  if (!options.kaiQueue.empty() &&
      memberAt(pod, {"metadata", "labels", kKaiQueueLabel}) == nullptr) {
    patch.setMapEntry(pod, {"metadata", "labels"}, kKaiQueueLabel, options.kaiQueue);
  }
  return patch;
}

JsonPatch assignmentPatch(const json& pod, const Assignment& assignment) {
  JsonPatch patch;
  const std::vector<std::string> annotationsPath = {"metadata", "annotations"};
  const json* annotations = memberAt(pod, {"metadata", "annotations"});
  const bool removeBackendPod = assignment.backendPod.empty() && annotations != nullptr &&
                                annotations->is_object() &&
                                annotations->contains(kBackendPodAnnotation);
  const bool removeStatus = annotations != nullptr && annotations->is_object() &&
                            annotations->contains(kBackendStatusAnnotation);
  if (removeBackendPod || removeStatus) {
    // A removal is written as the whole new map: a "remove" applied twice would fail.
    json desired = *annotations;
    desired.erase(std::string(kBackendStatusAnnotation));
    if (assignment.backendPod.empty()) {
      desired.erase(std::string(kBackendPodAnnotation));
    } else {
      desired[std::string(kBackendPodAnnotation)] = assignment.backendPod;
    }
    desired[std::string(kBackendAnnotation)] = assignment.endpoint;
    desired[std::string(kPropertiesAnnotation)] = assignment.properties;
    patch.add(jsonPointer(annotationsPath), desired);
  } else {
    patch.setMapEntry(pod, annotationsPath, kBackendAnnotation, assignment.endpoint);
    if (!assignment.backendPod.empty()) {
      patch.setMapEntry(pod, annotationsPath, kBackendPodAnnotation, assignment.backendPod);
    }
    patch.setMapEntry(pod, annotationsPath, kPropertiesAnnotation, assignment.properties);
  }

  const json* gates = memberAt(pod, {"spec", "schedulingGates"});
  if (findNamed(gates, kSchedulingGate)) {
    json remaining = json::array();
    for (const auto& gate : *gates) {
      if (stringOf(member(gate, "name")) != kSchedulingGate) {
        remaining.push_back(gate);
      }
    }
    patch.add(jsonPointer({"spec", "schedulingGates"}), remaining);
  }

  if (!assignment.preferredZone.empty()) {
    const json term = {{"weight", 100},
                       {"preference",
                        {{"matchExpressions",
                          json::array({{{"key", kZoneLabel},
                                        {"operator", "In"},
                                        {"values", json::array({assignment.preferredZone})}}})}}}};
    const char* preferred = "preferredDuringSchedulingIgnoredDuringExecution";
    const json* terms = memberAt(pod, {"spec", "affinity", "nodeAffinity", preferred});
    if (terms == nullptr || !terms->is_array() ||
        std::find(terms->begin(), terms->end(), term) == terms->end()) {
      patch.setMapEntry(pod, {"spec", "affinity", "nodeAffinity"}, preferred,
                        withAppended(terms, term));
    }
  }
  return patch;
}

JsonPatch waitingPatch(const json& pod) {
  JsonPatch patch;
  patch.setMapEntry(pod, {"metadata", "annotations"}, kBackendStatusAnnotation,
                    kBackendStatusWaiting);
  const json* gates = memberAt(pod, {"spec", "schedulingGates"});
  if (!findNamed(gates, kSchedulingGate)) {
    patch.add(jsonPointer({"spec", "schedulingGates"}),
              withAppended(gates, {{"name", kSchedulingGate}}));
  }
  return patch;
}

}  // namespace gvirtus::webhook
