#include "webhook/pods/pod_wiring.h"

#include <algorithm>

#include "common/base/json_access.h"
#include "common/base/strings.h"
#include "common/contract/quantity.h"
#include "common/contract/scheduling_gate.h"
#include "webhook/base/names.h"

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

// The names of gvirtus.io/containers, each once.
std::vector<std::string> containerNames(const std::string& text) {
  std::vector<std::string> names;
  for (auto& name : splitList(text)) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      names.push_back(std::move(name));
    }
  }
  return names;
}

std::string fieldPath() {
  return "metadata.annotations['" + std::string(kPropertiesAnnotation) + "']";
}

// The volume as the API server stores it (defaults written out), so that a reinvoked
// webhook finds it equal.
// Built once: a copy costs a tenth of building it from an initializer list (every review
// adds one).
const json& configVolume() {
  static const json volume = {
      {"name", kConfigVolume},
      {"downwardAPI",
       {{"defaultMode", 420},
        {"items",
         json::array({{{"path", kConfigFile},
                       {"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", fieldPath()}}}}})}}}};
  return volume;
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

const json& configMount() {
  static const json mount = {
      {"name", kConfigVolume}, {"mountPath", kConfigMountPath}, {"readOnly", true}};
  return mount;
}

const json& configEnv() {
  static const json env = {{"name", kConfigEnv}, {"value", kConfigPath}};
  return env;
}

void addVolume(json& pod) {
  json& volumes = arrayAt(pod, {"spec", "volumes"});
  if (auto index = findNamed(&volumes, kConfigVolume); !index) {
    volumes.push_back(configVolume());
  } else if (!isConfigVolume(volumes[*index])) {
    volumes[*index] = configVolume();
  }
}

Result<void> wireContainer(json& container, const std::string& name) {
  const json* mounts = member(container, "volumeMounts");
  if (auto index = findNamed(mounts, kConfigVolume)) {
    const json& mount = (*mounts)[*index];
    if (stringOf(member(mount, "mountPath")) != kConfigMountPath ||
        member(mount, "readOnly") == nullptr || *member(mount, "readOnly") != true ||
        member(mount, "subPath") != nullptr) {
      container["volumeMounts"][*index] = configMount();
    }
  } else {
    if (mounts != nullptr && mounts->is_array()) {
      for (const auto& mount : *mounts) {
        if (stringOf(member(mount, "mountPath")) == kConfigMountPath) {
          return fail("container \"" + name + "\" already mounts volume \"" +
                      stringOf(member(mount, "name")) + "\" at " + std::string(kConfigMountPath));
        }
      }
    }
    arrayAt(container, {"volumeMounts"}).push_back(configMount());
  }

  if (!findNamed(member(container, "env"), kConfigEnv)) {
    arrayAt(container, {"env"}).push_back(configEnv());
  }
  return {};
}

// KAI-Scheduler gives a pod with gpu-fraction or gpu-memory a share of a device through a
// reservation pod, and refuses the pod if it also asks for nvidia.com/gpu. Other schedulers
// ignore these annotations.
bool asksForGpuShare(const json& pod) {
  const json* annotations = memberAt(pod, {"metadata", "annotations"});
  return annotations != nullptr && annotations->is_object() &&
         (annotations->contains(kKaiGpuFractionAnnotation) ||
          annotations->contains(kKaiGpuMemoryAnnotation));
}

// The nvidia.com/gpu a container asks for (its limit, else its request; the API server
// makes them equal for an extended resource); nullopt when it asks for none.
Result<std::optional<double>> gpusAsked(const json& container, const std::string& name) {
  for (const char* section : {"limits", "requests"}) {
    const json* value = memberAt(container, {"resources", section, kGpuResource});
    if (value == nullptr) {
      continue;
    }
    if (value->is_number()) {
      return std::optional(value->get<double>());
    }
    auto parsed = parseQuantity(stringOf(value));
    if (!parsed) {
      return fail("container \"" + name + "\": " + std::string(kGpuResource) + ": " +
                  parsed.error().message);
    }
    return std::optional(*parsed);
  }
  return std::optional<double>();
}

}  // namespace

Result<std::vector<WiredContainer>> wiredContainers(const json& pod) {
  const json* containers = memberAt(pod, {"spec", "containers"});
  if (containers == nullptr || !containers->is_array() || containers->empty()) {
    return fail("the pod has no containers");
  }
  const json* initContainers = memberAt(pod, {"spec", "initContainers"});
  const auto names =
      containerNames(stringOf(memberAt(pod, {"metadata", "annotations", kContainersAnnotation})));
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

Result<void> wirePod(json& pod, const WiringOptions& options) {
  auto targets = wiredContainers(pod);
  if (!targets) {
    return fail(targets.error());
  }
  auto containerOf = [&](const WiredContainer& target) -> json& {
    return pod["spec"][target.field][target.index];
  };
  addVolume(pod);
  for (const auto& target : *targets) {
    if (auto ok = wireContainer(containerOf(target), target.name); !ok) {
      return fail(ok.error());
    }
  }
  objectAt(pod, {"spec", "nodeSelector"})[kFrontendAllowed] = "true";
  if (!options.schedulerName.empty()) {
    const std::string current = stringOf(memberAt(pod, {"spec", "schedulerName"}));
    if (current.empty() || current == "default-scheduler") {
      pod["spec"]["schedulerName"] = options.schedulerName;
    }
  }
  // After the scheduler name: a KAI share stands in for the limit only where KAI schedules,
  // and KAI never sees a pod whose author bound it to a node (spec.nodeName).
  const bool kaiShare =
      asksForGpuShare(pod) && !options.schedulerName.empty() &&
      stringOf(memberAt(pod, {"spec", "schedulerName"})) == options.schedulerName &&
      stringOf(memberAt(pod, {"spec", "nodeName"})).empty();
  if (!kaiShare) {
    // Every GVirtuS pod holds a remote GPU, so a namespace's nvidia.com/gpu quota counts it
    // as at least one: an ask of "0" of its own would run it uncounted.
    std::optional<double> asked;
    for (const auto& target : *targets) {
      auto gpus = gpusAsked(containerOf(target), target.name);
      if (!gpus) {
        return fail(gpus.error());
      }
      if (*gpus) {
        asked = asked.value_or(0) + **gpus;
      }
    }
    if (asked && *asked < 1) {
      return fail(std::string(kGpuResource) + " below 1: a GVirtuS pod holds a remote GPU and " +
                  "counts as at least 1 against the namespace's quota (ask for 1 or more, or " +
                  "leave " + kGpuResource + " out)");
    }
    if (!asked && options.addGpuLimit) {
      objectAt(containerOf(targets->front()), {"resources", "limits"})[kGpuResource] = "1";
    }
  }
  if (!options.kaiQueue.empty() &&
      memberAt(pod, {"metadata", "labels", kKaiQueueLabel}) == nullptr) {
    objectAt(pod, {"metadata", "labels"})[kKaiQueueLabel] = options.kaiQueue;
  }
  return {};
}

void assignBackend(json& pod, const Assignment& assignment) {
  json& annotations = objectAt(pod, {"metadata", "annotations"});
  annotations.erase(std::string(kBackendStatusAnnotation));
  if (assignment.backendPod.empty()) {
    annotations.erase(std::string(kBackendPodAnnotation));
  } else {
    annotations[kBackendPodAnnotation] = assignment.backendPod;
  }
  annotations[kBackendAnnotation] = assignment.endpoint;
  // Also removed when absent: a value the pod's author wrote would count against a GPU.
  if (assignment.gpuIndex) {
    annotations[kBackendGpuAnnotation] = std::to_string(*assignment.gpuIndex);
  } else {
    annotations.erase(std::string(kBackendGpuAnnotation));
  }
  annotations[kPropertiesAnnotation] = assignment.properties;
  if (assignment.assignedBy.empty()) {
    annotations.erase(std::string(kAssignedByAnnotation));
  } else {
    annotations[kAssignedByAnnotation] = assignment.assignedBy;
  }

  removeBackendGate(pod, false);

  if (!assignment.preferredZone.empty()) {
    const json term = {{"weight", 100},
                       {"preference",
                        {{"matchExpressions",
                          json::array({{{"key", kZoneLabel},
                                        {"operator", "In"},
                                        {"values", json::array({assignment.preferredZone})}}})}}}};
    json& terms = arrayAt(pod, {"spec", "affinity", "nodeAffinity",
                                "preferredDuringSchedulingIgnoredDuringExecution"});
    if (std::find(terms.begin(), terms.end(), term) == terms.end()) {
      terms.push_back(term);
    }
  }
}

void markWaiting(json& pod) {
  objectAt(pod, {"metadata", "annotations"})[kBackendStatusAnnotation] = kBackendStatusWaiting;
  addBackendGate(pod);
}

bool isWaiting(const json& pod) {
  const json* metadata = member(pod, "metadata");
  return metadata != nullptr && member(*metadata, "deletionTimestamp") == nullptr &&
         carriesBackendGate(pod);
}

bool gatedByWebhook(const json& pod) {
  if (stringOf(memberAt(pod, {"metadata", "annotations", kBackendStatusAnnotation})) !=
      kBackendStatusWaiting) {
    return false;
  }
  const json* volumes = memberAt(pod, {"spec", "volumes"});
  auto index = findNamed(volumes, kConfigVolume);
  return index && isConfigVolume((*volumes)[*index]);
}

}  // namespace gvirtus::webhook
