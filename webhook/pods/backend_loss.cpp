#include "webhook/pods/backend_loss.h"

#include "common/base/json_access.h"
#include "common/contract/pod_status.h"
#include "common/time/time_text.h"
#include "webhook/base/names.h"
#include "webhook/pods/pod_fields.h"
#include "webhook/pods/pod_wiring.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// The IP of "IP:PORT"; "" for anything else.
std::string endpointIp(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  return colon == std::string::npos ? std::string() : endpoint.substr(0, colon);
}

BackendLoss waitUntil(TimePoint at) {
  return BackendLoss{BackendLoss::Kind::kWaiting, "", at};
}

}  // namespace

std::optional<FollowedBackend> followedBackend(const json& pod) {
  if (stringAt(pod, {"metadata", "labels", kEnabledLabel}) != "true" || isWaiting(pod) ||
      memberAt(pod, {"metadata", "deletionTimestamp"}) != nullptr) {
    return std::nullopt;
  }
  if (podFinished(pod)) {
    return std::nullopt;
  }
  FollowedBackend followed{
      stringAt(pod, {"metadata", "annotations", kBackendPodAnnotation}),
      endpointIp(stringAt(pod, {"metadata", "annotations", kBackendAnnotation}))};
  if (followed.backendPod.empty() || followed.ip.empty()) {
    return std::nullopt;
  }
  return followed;
}

BackendLoss backendLoss(const FollowedBackend& followed, const json* backend, TimePoint created,
                        TimePoint now, Duration grace) {
  const std::string name = "backend pod " + followed.backendPod;
  if (backend == nullptr) {
    if (now < created + kAbsentSettle) {
      return waitUntil(created + kAbsentSettle);
    }
    return {BackendLoss::Kind::kGone, name + " is gone", std::nullopt};
  }
  const std::string ip = podIpv4(*backend);
  if (!ip.empty() && !followed.ip.empty() && ip != followed.ip) {
    return {BackendLoss::Kind::kGone,
            name + " has a new address " + ip + " (this pod was given " + followed.ip + ")",
            std::nullopt};
  }
  if (memberAt(*backend, {"metadata", "deletionTimestamp"}) != nullptr) {
    auto deadline = parseRfc3339(stringAt(*backend, {"metadata", "deletionTimestamp"}));
    if (!deadline || now < *deadline + grace) {
      // Draining: its delete event, or the deadline, brings the pod back.
      return waitUntil(deadline ? *deadline + grace : now + grace);
    }
    return {BackendLoss::Kind::kGone,
            name + " is stuck terminating (its node may be lost) past its grace period",
            std::nullopt};
  }
  if (podReady(*backend) && !ip.empty()) {
    return {};
  }
  // Not ready since the condition last changed; without one (a pod just created under the
  // old name), since it was created.
  TimePoint since = now;
  if (auto readySince = podReadySince(*backend)) {
    since = *readySince;
  } else if (auto backendCreated =
                 parseRfc3339(stringAt(*backend, {"metadata", "creationTimestamp"}))) {
    since = *backendCreated;
  }
  if (now < since + grace) {
    return waitUntil(since + grace);
  }
  return {BackendLoss::Kind::kNotReady,
          name + " has not been ready for " + formatDuration(grace) + " or more", std::nullopt};
}

namespace {

// The pod's controlling owner when it is a workload controller that replaces its deleted
// pods; null otherwise. Its API group is checked where the reference names one (a whole
// pod; a compact record keeps only such an owner, without it).
const json* replacingOwner(const json& pod) {
  const json* owners = memberAt(pod, {"metadata", "ownerReferences"});
  for (size_t i = 0; owners != nullptr && owners->is_array() && i < owners->size(); ++i) {
    const json& owner = (*owners)[i];
    const json* controller = member(owner, "controller");
    if (controller == nullptr || *controller != true) {
      continue;
    }
    const std::string kind = stringAt(owner, {"kind"});
    const json* apiVersion = member(owner, "apiVersion");
    for (const auto& [replacing, version] :
         {std::pair{"ReplicaSet", "apps/v1"}, std::pair{"StatefulSet", "apps/v1"},
          std::pair{"DaemonSet", "apps/v1"}, std::pair{"Job", "batch/v1"},
          std::pair{"ReplicationController", "v1"}}) {
      if (kind == replacing && (apiVersion == nullptr || *apiVersion == version)) {
        return &owner;
      }
    }
    return nullptr;
  }
  return nullptr;
}

}  // namespace

std::string controllingOwner(const json& pod) {
  const json* owner = replacingOwner(pod);
  return owner == nullptr ? "" : stringAt(*owner, {"kind"}) + " " + stringAt(*owner, {"name"});
}

json compactOwners(const json& pod) {
  const json* owner = replacingOwner(pod);
  if (owner == nullptr) {
    return nullptr;
  }
  return json::array({{{"kind", stringAt(*owner, {"kind"})},
                       {"name", stringAt(*owner, {"name"})},
                       {"controller", true}}});
}

std::string backendLostCondition(const json& pod) {
  const json* condition = podCondition(pod, names::kBackendLostCondition);
  return condition != nullptr ? stringAt(*condition, {"status"}) : "";
}

}  // namespace gvirtus::webhook
