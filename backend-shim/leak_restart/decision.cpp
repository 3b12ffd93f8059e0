#include "backend-shim/leak_restart/decision.h"

#include "common/base/json_access.h"
#include "common/contract/pod_status.h"

namespace gvirtus::backend_shim {
BackendPod backendPodFrom(const nlohmann::json& pod) {
  BackendPod out;
  out.name = stringAt(pod, {"metadata", "name"});
  const bool terminating = memberAt(pod, {"metadata", "deletionTimestamp"}) != nullptr &&
                           !memberAt(pod, {"metadata", "deletionTimestamp"})->is_null();
  out.ready = podReady(pod) && !podIpv4(pod).empty() && !terminating;
  return out;
}

LeakRestartDecision decideLeakRestart(const Result<std::vector<BackendPod>>& pods,
                                      const std::string& self, Duration deferredFor,
                                      Duration maxDefer) {
  if (deferredFor >= maxDefer) {
    return {true, "deferred for " + formatDuration(deferredFor) +
                      ", as long as --leak-restart-max-defer allows (" + formatDuration(maxDefer) +
                      "): restarting whatever the other backends are"};
  }
  if (!pods) {
    return {false, "cannot tell whether another backend is ready: " + pods.error().message};
  }
  constexpr int kNamed = 3;  // pods named in the reason; the rest are counted
  std::string ready;
  int count = 0;
  for (const auto& pod : *pods) {
    if (pod.name != self && pod.ready) {
      if (count < kNamed) {
        ready += (count == 0 ? "" : ",") + pod.name;
      }
      ++count;
    }
  }
  if (count == 0) {
    return {false, "no other backend pod is ready: this one would take the last ones down"};
  }
  return {true, std::to_string(count) + " other backend pod(s) ready: " + ready +
                    (count > kNamed ? ",..." : "")};
}

bool seenNotReady(const std::vector<BackendPod>& pods, const std::string& self) {
  for (const auto& pod : pods) {
    if (pod.name == self) {
      return !pod.ready;
    }
  }
  return false;
}

}  // namespace gvirtus::backend_shim
