#include "common/contract/pod_origin.h"

#include "common/base/json_access.h"

namespace gvirtus {

using nlohmann::json;

namespace {

// The annotation the kubelet puts on every mirror pod (k8s.io/kubernetes pkg/kubelet/types).
constexpr const char* kMirrorAnnotation = "kubernetes.io/config.mirror";

}  // namespace

bool isMirrorPod(const json& pod) {
  return memberAt(pod, {"metadata", "annotations", kMirrorAnnotation}) != nullptr;
}

bool usesHostNetwork(const json& pod) {
  const json* hostNetwork = memberAt(pod, {"spec", "hostNetwork"});
  return hostNetwork != nullptr && hostNetwork->is_boolean() && hostNetwork->get<bool>();
}

}  // namespace gvirtus
