#pragma once

#include <nlohmann/json.hpp>

// Where a pod came from, as its own object tells, and so what its address and its
// annotations can vouch for. Read one way by the webhook's admission, its backend list and
// its peer lists.
namespace gvirtus {

// A mirror pod: the API's copy of a static pod, which a kubelet creates with its node's own
// credentials (annotation kubernetes.io/config.mirror). No controller and no admission of
// ours made it, so nothing it carries was decided by us; a taken node can write any labels
// and annotations on one.
bool isMirrorPod(const nlohmann::json& pod);

// spec.hostNetwork: the pod's address is its node's, shared by every process on that node.
bool usesHostNetwork(const nlohmann::json& pod);

}  // namespace gvirtus
