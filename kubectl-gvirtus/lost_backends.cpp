#include "kubectl-gvirtus/lost_backends.h"

#include <algorithm>
#include <tuple>

#include "common/base/json_access.h"
#include "common/contract/labels.h"
#include "common/contract/pod_status.h"

namespace gvirtus::kubectl_gvirtus {
namespace {

using nlohmann::json;

// "gvirtus-system/name", or a bare name in gvirtus-system.
std::string qualified(const std::string& ref) {
  return ref.find('/') == std::string::npos ? std::string(names::kSystemNamespace) + "/" + ref
                                            : ref;
}

// The IP of "IP:PORT" (the last colon: an IPv6 address holds more).
std::string ipOf(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  std::string ip = colon == std::string::npos ? endpoint : endpoint.substr(0, colon);
  if (ip.size() >= 2 && ip.front() == '[' && ip.back() == ']') {
    ip = ip.substr(1, ip.size() - 2);
  }
  return ip;
}

// What is wrong with the backend pod, or nullopt when nothing is.
std::optional<std::pair<LostView::Problem, std::string>> problemOf(const json* backendPod,
                                                                   const std::string& endpoint,
                                                                   TimePoint now) {
  using Problem = LostView::Problem;
  if (backendPod == nullptr) {
    return std::pair(Problem::Gone, std::string("the backend pod no longer exists"));
  }
  const std::string ip = podIpv4(*backendPod);
  if (ip != ipOf(endpoint)) {
    return std::pair(Problem::Gone, ip.empty() ? "the backend pod has no IP now"
                                               : "the backend pod is at " + ip + " now");
  }
  if (podReady(*backendPod)) {
    return std::nullopt;
  }
  std::string detail = "the backend pod is not Ready";
  if (auto changed = podReadySince(*backendPod)) {
    detail += " for " + formatAge(since(changed, now));
  }
  if (isDeleting(*backendPod)) {
    detail += " and being deleted";
  }
  return std::pair(Problem::NotReady, detail);
}

}  // namespace

const char* problemName(LostView::Problem problem) {
  switch (problem) {
    case LostView::Problem::Gone:
      return "gone";
    case LostView::Problem::NotReady:
      return "not-ready";
    case LostView::Problem::Marked:
      return "marked";
  }
  return "gone";
}

BackendPods indexBackendPods(const std::vector<json>& pods, const std::string& ns) {
  BackendPods out{ns, {}};
  for (const auto& pod : pods) {
    out.byRef[stringAt(pod, {"metadata", "namespace"}) + "/" +
              stringAt(pod, {"metadata", "name"})] = &pod;
  }
  return out;
}

std::optional<LostView> lostBackend(const json& pod, const BackendPods& backends,
                                    const std::vector<EventView>& podEvents, TimePoint now) {
  const std::string ref = annotationOf(pod, names::kBackendPodAnnotation);
  const std::string endpoint = annotationOf(pod, names::kBackendAnnotation);
  if (ref.empty() || endpoint.empty() || podFinished(pod)) {
    return std::nullopt;
  }
  LostView view;
  view.ns = stringAt(pod, {"metadata", "namespace"});
  view.name = stringAt(pod, {"metadata", "name"});
  view.backend = endpoint;
  view.backendPod = ref;
  view.deleting = isDeleting(pod);
  if (const json* c = podCondition(pod, names::kBackendLostCondition);
      c != nullptr && stringAt(*c, {"status"}) == "True") {
    view.condition = stringAt(*c, {"reason"}) + ": " + stringAt(*c, {"message"});
  }
  const std::string qualifiedRef = qualified(ref);
  std::optional<std::pair<LostView::Problem, std::string>> problem;
  if (qualifiedRef.starts_with(backends.ns + "/")) {
    auto it = backends.byRef.find(qualifiedRef);
    problem = problemOf(it == backends.byRef.end() ? nullptr : it->second, endpoint, now);
  }
  if (problem) {
    std::tie(view.problem, view.detail) = *problem;
  } else if (!view.condition.empty()) {
    view.problem = LostView::Problem::Marked;
    view.detail = "marked lost by the webhook (" + view.condition + ")";
  } else {
    return std::nullopt;
  }
  if (const EventView* action =
          latestOf(podEvents, {names::kBackendLostReason, names::kBackendLostRecreatedReason})) {
    view.action = *action;
  }
  return view;
}

std::vector<LostView> lostViews(const std::vector<json>& gvirtusPods, const BackendPods& backends,
                                const PodEvents& events, TimePoint now) {
  std::vector<LostView> out;
  for (const auto& pod : gvirtusPods) {
    // Only assigned pods can have lost a backend: read their Events, not every pod's.
    if (annotationOf(pod, names::kBackendPodAnnotation).empty()) {
      continue;
    }
    if (auto lost = lostBackend(pod, backends, events.of(pod), now)) {
      out.push_back(std::move(*lost));
    }
  }
  std::sort(out.begin(), out.end(), [](const LostView& a, const LostView& b) {
    return std::tie(a.problem, a.ns, a.name) < std::tie(b.problem, b.ns, b.name);
  });
  return out;
}

std::string actionText(const LostView& lost, TimePoint now) {
  if (!lost.action) {
    return "nothing yet";
  }
  return lost.action->reason + " " + formatAge(since(lost.action->last, now)) +
         " ago: " + lost.action->message;
}

}  // namespace gvirtus::kubectl_gvirtus
