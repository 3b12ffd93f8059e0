#include "webhook/dra/device_taint_rule.h"

#include "common/base/json_access.h"
#include "common/contract/dra_names.h"
#include "webhook/base/names.h"
#include "webhook/dra/slice.h"

namespace gvirtus::webhook {

using nlohmann::json;

std::string lostRuleName(const std::string& backendPod) {
  std::string name = backendPod;
  if (const size_t slash = name.find('/'); slash != std::string::npos) {
    name[slash] = '-';
  }
  return boundedName("gvirtus-lost-" + name);
}

json lostBackendRule(const std::string& backendPod, const std::string& why) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "DeviceTaintRule"},
          {"metadata",
           {{"name", lostRuleName(backendPod)},
            {"labels", {{kManagedByLabel, kManagedBy}}},
            {"annotations", {{kBackendPodAnnotation, backendPod}}}}},
          {"spec",
           {{"deviceSelector", {{"driver", dra::kDriver}, {"pool", backendPod}}},
            {"taint", {{"key", kBackendLostTaintKey}, {"value", why}, {"effect", "NoExecute"}}}}}};
}

std::string ruleBackendPod(const json& rule) {
  if (stringAt(rule, {"metadata", "labels", kManagedByLabel}) != kManagedBy ||
      stringAt(rule, {"spec", "deviceSelector", "driver"}) != dra::kDriver) {
    return "";
  }
  const std::string backendPod = stringAt(rule, {"metadata", "annotations", kBackendPodAnnotation});
  return stringAt(rule, {"spec", "deviceSelector", "pool"}) == backendPod ? backendPod : "";
}

bool taintRulesUsable(KubeClient& client, std::string& whyNot) {
  ListOptions one;
  one.limit = 1;
  auto listed = client.list(dra::kDeviceTaintRules, "", one);
  if (listed) {
    return true;
  }
  if (listed.error().isNotFound()) {
    whyNot =
        "the API server serves no DeviceTaintRules of resource.k8s.io/v1 (Kubernetes 1.36 "
        "or older, or DRADeviceTaintRules off)";
  } else {
    whyNot = "cannot list DeviceTaintRules (" + listed.error().message +
             "; ClusterRole gvirtus-webhook-dra of an older release?)";
  }
  return false;
}

}  // namespace gvirtus::webhook
