#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kubectl-gvirtus/pod_events.h"
#include "kubectl-gvirtus/pod_facts.h"

// GVirtuS pods whose backend went away, and what the webhook's leader did about them
// (webhook/follower/follower.h): it leaves the Events BackendLost (a bare pod, left for its
// user to delete) or BackendLostRecreated (the pod deleted so that its owner recreates it),
// and on bare pods the condition gvirtus.io/BackendLost.
namespace gvirtus::kubectl_gvirtus {

// The backend pods as listed: those of one namespace, by "namespace/name". The pods must
// outlive the index.
struct BackendPods {
  std::string ns;
  std::map<std::string, const nlohmann::json*> byRef;
};
BackendPods indexBackendPods(const std::vector<nlohmann::json>& pods, const std::string& ns);

struct LostView {
  // Gone: no backend pod of that name, or it has another IP than the pod was given.
  // NotReady: the backend pod is not Ready. Marked: the plugin sees nothing wrong, but the
  // webhook set the pod's condition gvirtus.io/BackendLost.
  enum class Problem { Gone, NotReady, Marked };
  std::string ns;
  std::string name;
  std::string backend;     // gvirtus.io/backend, "IP:PORT"
  std::string backendPod;  // gvirtus.io/backend-pod, "namespace/name"
  Problem problem = Problem::Gone;
  std::string detail;               // what is wrong, one phrase
  std::string condition;            // "REASON: message" of gvirtus.io/BackendLost when "True"
  bool deleting = false;            // the frontend pod is being deleted
  std::optional<EventView> action;  // the latest BackendLost* Event: what was done
};

const char* problemName(LostView::Problem problem);

// The pod's lost backend; nullopt when its backend is fine, unknown (a static backend, or a
// backend pod in another namespace than the one listed) or the pod has finished.
// `podEvents` are the pod's Events, oldest first.
std::optional<LostView> lostBackend(const nlohmann::json& pod, const BackendPods& backends,
                                    const std::vector<EventView>& podEvents, TimePoint now);

// Every such pod among `gvirtusPods`: gone first, then not ready, then marked; by
// namespace and name within each.
std::vector<LostView> lostViews(const std::vector<nlohmann::json>& gvirtusPods,
                                const BackendPods& backends, const PodEvents& events,
                                TimePoint now);

// What was done, one phrase: "BackendLostRecreated 12s ago: <message>", or "nothing yet".
std::string actionText(const LostView& lost, TimePoint now);

}  // namespace gvirtus::kubectl_gvirtus
