#include "common/contract/pod_status.h"

#include "common/base/json_access.h"
#include "common/net/ipv4_resolver.h"
#include "common/time/time_text.h"

namespace gvirtus {

using nlohmann::json;

const json* podCondition(const json& pod, std::string_view type) {
  const json* conditions = memberAt(pod, {"status", "conditions"});
  for (size_t i = 0; conditions != nullptr && conditions->is_array() && i < conditions->size();
       ++i) {
    if (stringAt((*conditions)[i], {"type"}) == type) {
      return &(*conditions)[i];
    }
  }
  return nullptr;
}

bool podFinished(const json& pod) {
  return phaseFinished(stringAt(pod, {"status", "phase"}));
}

bool phaseFinished(std::string_view phase) {
  return phase == "Succeeded" || phase == "Failed";
}

bool podReady(const json& pod) {
  const json* ready = podCondition(pod, "Ready");
  return ready != nullptr && stringAt(*ready, {"status"}) == "True";
}

std::optional<std::chrono::system_clock::time_point> podReadySince(const json& pod) {
  const json* ready = podCondition(pod, "Ready");
  if (ready == nullptr) {
    return std::nullopt;
  }
  auto since = parseRfc3339(stringAt(*ready, {"lastTransitionTime"}));
  return since ? std::optional(*since) : std::nullopt;
}

std::string podIpv4(const json& pod) {
  std::string ip = stringAt(pod, {"status", "podIP"});
  if (isDottedIpv4(ip)) {
    return ip;
  }
  // An IPv6-first dual-stack pod: its IPv4 address is in podIPs.
  const json* ips = memberAt(pod, {"status", "podIPs"});
  for (size_t i = 0; ips != nullptr && ips->is_array() && i < ips->size(); ++i) {
    ip = stringAt((*ips)[i], {"ip"});
    if (isDottedIpv4(ip)) {
      return ip;
    }
  }
  return "";
}

}  // namespace gvirtus
