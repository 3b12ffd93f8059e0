#include "kubectl-gvirtus/cluster_view.h"

#include <algorithm>
#include <tuple>

#include "common/json_access.h"
#include "common/labels.h"
#include "common/time_text.h"
#include "webhook/cluster_backend_source.h"

namespace gvirtus::kubectl_gvirtus {
namespace {

using nlohmann::json;

// The waiting-pod controller's Event reasons (webhook/waiting_pod_controller.h) and the
// prefix of the waiting message.
constexpr const char* kWaitingReason = "WaitingForBackend";
constexpr const char* kWaitingPrefix = "Waiting for a GVirtuS backend: ";

std::string annotation(const json& pod, const char* key) {
  const json* annotations = nullptr;
  if (auto meta = pod.find("metadata"); meta != pod.end() && meta->is_object()) {
    if (auto a = meta->find("annotations"); a != meta->end() && a->is_object()) {
      annotations = &*a;
    }
  }
  if (annotations == nullptr) {
    return "";
  }
  auto it = annotations->find(key);
  return it != annotations->end() && it->is_string() ? it->get<std::string>() : "";
}

std::string label(const json& pod, const char* key) {
  if (auto meta = pod.find("metadata"); meta != pod.end() && meta->is_object()) {
    if (auto labels = meta->find("labels"); labels != meta->end() && labels->is_object()) {
      auto it = labels->find(key);
      return it != labels->end() && it->is_string() ? it->get<std::string>() : "";
    }
  }
  return "";
}

std::optional<TimePoint> timeAt(const json& object, std::initializer_list<std::string_view> path) {
  auto parsed = parseRfc3339(stringAt(object, path));
  return parsed ? std::optional(*parsed) : std::nullopt;
}

std::chrono::seconds since(std::optional<TimePoint> then, TimePoint now) {
  if (!then || *then > now) {
    return std::chrono::seconds(0);
  }
  return std::chrono::duration_cast<std::chrono::seconds>(now - *then);
}

bool isReady(const json& pod) {
  const json* conditions = nullptr;
  if (auto status = pod.find("status"); status != pod.end() && status->is_object()) {
    if (auto c = status->find("conditions"); c != status->end() && c->is_array()) {
      conditions = &*c;
    }
  }
  if (conditions == nullptr) {
    return false;
  }
  return std::any_of(conditions->begin(), conditions->end(), [](const json& c) {
    return stringAt(c, {"type"}) == "Ready" && stringAt(c, {"status"}) == "True";
  });
}

bool isGated(const json& pod) {
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) {
    return false;
  }
  auto gates = spec->find("schedulingGates");
  if (gates == spec->end() || !gates->is_array()) {
    return false;
  }
  return std::any_of(gates->begin(), gates->end(),
                     [](const json& g) { return stringAt(g, {"name"}) == names::kSchedulingGate; });
}

bool isFinished(const json& pod) {
  const std::string phase = stringAt(pod, {"status", "phase"});
  return phase == "Succeeded" || phase == "Failed";
}

bool isAbout(const json& event, const json& pod) {
  const std::string uid = stringAt(pod, {"metadata", "uid"});
  const std::string eventUid = stringAt(event, {"involvedObject", "uid"});
  if (!uid.empty() && !eventUid.empty()) {
    return uid == eventUid;
  }
  return stringAt(event, {"involvedObject", "kind"}) == "Pod" &&
         stringAt(event, {"involvedObject", "namespace"}) ==
             stringAt(pod, {"metadata", "namespace"}) &&
         stringAt(event, {"involvedObject", "name"}) == stringAt(pod, {"metadata", "name"});
}

std::optional<TimePoint> eventTime(const json& event) {
  for (auto path : {std::initializer_list<std::string_view>{"lastTimestamp"},
                    {"eventTime"},
                    {"firstTimestamp"},
                    {"metadata", "creationTimestamp"}}) {
    if (auto t = timeAt(event, path)) {
      return t;
    }
  }
  return std::nullopt;
}

EventView eventView(const json& event) {
  EventView view;
  view.type = stringAt(event, {"type"});
  view.reason = stringAt(event, {"reason"});
  view.message = stringAt(event, {"message"});
  view.source = stringAt(event, {"source", "component"});
  if (view.source.empty()) {
    view.source = stringAt(event, {"reportingComponent"});
  }
  if (auto c = event.find("count"); c != event.end() && c->is_number_integer()) {
    view.count = c->get<int64_t>();
  }
  view.last = eventTime(event);
  return view;
}

// The pod's Events, oldest first.
std::vector<EventView> eventsOf(const json& pod, const std::vector<json>& events) {
  std::vector<EventView> out;
  for (const auto& event : events) {
    if (isAbout(event, pod)) {
      out.push_back(eventView(event));
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const EventView& a, const EventView& b) {
    return a.last.value_or(TimePoint::min()) < b.last.value_or(TimePoint::min());
  });
  return out;
}

std::string waitingReason(const std::vector<EventView>& events) {
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    if (it->reason == kWaitingReason) {
      std::string message = it->message;
      if (message.rfind(kWaitingPrefix, 0) == 0) {
        message = message.substr(std::string(kWaitingPrefix).size());
      }
      return message;
    }
  }
  return "no reason recorded yet (the webhook's controller writes an Event WaitingForBackend "
         "at its next pass; is a gvirtus-webhook replica running?)";
}

}  // namespace

std::string formatAge(std::chrono::seconds age) {
  const int64_t s = age.count();
  if (s < 120) {
    return std::to_string(s) + "s";
  }
  if (s < 2 * 3600) {
    return std::to_string(s / 60) + "m";
  }
  if (s < 2 * 86400) {
    return std::to_string(s / 3600) + "h";
  }
  return std::to_string(s / 86400) + "d";
}

const char* stateName(PodExplanation::State state) {
  switch (state) {
    case PodExplanation::State::NotGvirtus:
      return "not-gvirtus";
    case PodExplanation::State::Assigned:
      return "assigned";
    case PodExplanation::State::Waiting:
      return "waiting";
    case PodExplanation::State::NoBackend:
      return "no-backend";
  }
  return "not-gvirtus";
}

std::vector<BackendView> backendViews(const std::vector<json>& backendPods,
                                      const std::vector<json>& gvirtusPods, int port,
                                      TimePoint now) {
  // The GPU shares of the GVirtuS pods, by backend endpoint, read once for all backends.
  std::vector<std::pair<std::string, webhook::GpuShare>> shares;
  for (const auto& p : gvirtusPods) {
    if (auto held = webhook::heldShare(p)) {
      shares.push_back(std::move(*held));
    }
  }
  std::vector<BackendView> out;
  for (const auto& pod : backendPods) {
    if (stringAt(pod, {"metadata", "deletionTimestamp"}) != "" && !isReady(pod)) {
      continue;  // going away
    }
    BackendView view;
    view.ns = stringAt(pod, {"metadata", "namespace"});
    view.name = stringAt(pod, {"metadata", "name"});
    view.node = stringAt(pod, {"spec", "nodeName"});
    const std::string ip = stringAt(pod, {"status", "podIP"});
    view.endpoint = ip.empty() ? "" : ip + ":" + std::to_string(port);
    view.ready = isReady(pod) && !ip.empty();
    if (const std::string text = annotation(pod, names::kLoadAnnotation); !text.empty()) {
      if (auto load = webhook::parseBackendLoad(text)) {
        view.load = *load;
        if (load->updated) {
          view.loadAge = since(load->updated, now);
        }
      } else {
        view.loadError = load.error().message;
      }
    }
    const std::string ref = view.ns + "/" + view.name;
    view.pods = std::count_if(gvirtusPods.begin(), gvirtusPods.end(), [&](const json& p) {
      return !isFinished(p) && annotation(p, names::kBackendPodAnnotation) == ref;
    });
    for (const auto& [endpoint, share] : shares) {
      if (!view.load || endpoint != view.endpoint) {
        continue;
      }
      for (const auto& gpu : view.load->gpus) {
        if (gpu.index == share.gpuIndex) {
          view.heldMiB += webhook::memoryDemandMiB(share.demand, gpu.memoryTotalMiB);
        }
      }
    }
    out.push_back(std::move(view));
  }
  std::sort(out.begin(), out.end(), [](const BackendView& a, const BackendView& b) {
    return std::tie(a.node, a.ns, a.name) < std::tie(b.node, b.ns, b.name);
  });
  return out;
}

std::vector<WaitingView> waitingViews(const std::vector<json>& gvirtusPods,
                                      const std::vector<json>& events, TimePoint now) {
  std::vector<std::pair<TimePoint, WaitingView>> ranked;
  for (const auto& pod : gvirtusPods) {
    if (!isGated(pod) || stringAt(pod, {"metadata", "deletionTimestamp"}) != "") {
      continue;
    }
    const auto created = timeAt(pod, {"metadata", "creationTimestamp"});
    WaitingView view{stringAt(pod, {"metadata", "namespace"}), stringAt(pod, {"metadata", "name"}),
                     since(created, now), waitingReason(eventsOf(pod, events))};
    ranked.emplace_back(created.value_or(now), std::move(view));
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first, a.second.ns, a.second.name) <
           std::tie(b.first, b.second.ns, b.second.name);
  });
  std::vector<WaitingView> out;
  for (auto& entry : ranked) {
    out.push_back(std::move(entry.second));
  }
  return out;
}

PodExplanation explainPod(const json& pod, const std::vector<json>& events,
                          const std::vector<BackendView>& backends, TimePoint now) {
  PodExplanation out;
  out.ns = stringAt(pod, {"metadata", "namespace"});
  out.name = stringAt(pod, {"metadata", "name"});
  out.phase = stringAt(pod, {"status", "phase"});
  out.node = stringAt(pod, {"spec", "nodeName"});
  out.backend = annotation(pod, names::kBackendAnnotation);
  out.backendPod = annotation(pod, names::kBackendPodAnnotation);
  out.events = eventsOf(pod, events);
  const bool labelled = label(pod, names::kEnabledLabel) == "true";

  if (isGated(pod)) {
    out.state = PodExplanation::State::Waiting;
    const auto age = since(timeAt(pod, {"metadata", "creationTimestamp"}), now);
    out.summary = "waits for a GVirtuS backend (scheduling gate " +
                  std::string(names::kSchedulingGate) + ", " + formatAge(age) +
                  "): " + waitingReason(out.events);
    return out;
  }
  if (!out.backend.empty()) {
    out.state = PodExplanation::State::Assigned;
    out.summary = "uses the GVirtuS backend " + out.backend;
    if (!out.backendPod.empty()) {
      auto it = std::find_if(backends.begin(), backends.end(), [&](const BackendView& b) {
        return b.ns + "/" + b.name == out.backendPod;
      });
      if (it == backends.end()) {
        out.summary += " (backend pod " + out.backendPod +
                       ", which no longer exists: its CUDA session has ended; restart the pod "
                       "to get a new backend)";
      } else {
        out.backendView = *it;
        out.summary += " (backend pod " + out.backendPod + " on node " + it->node +
                       (it->ready ? "" : ", not Ready now") + ")";
        if (it->endpoint != out.backend && !it->endpoint.empty()) {
          out.summary += "; the backend pod now serves " + it->endpoint +
                         ", the pod still points at the old address: restart it";
        }
      }
    } else {
      out.summary += " (a static backend, outside the cluster)";
    }
    return out;
  }
  if (!labelled) {
    out.state = PodExplanation::State::NotGvirtus;
    out.summary = "is not a GVirtuS pod: it lacks the label " + std::string(names::kEnabledLabel) +
                  "=\"true\" (the webhook gives backends only to pods created with it)";
    return out;
  }
  out.state = PodExplanation::State::NoBackend;
  out.summary =
      "is labelled " + std::string(names::kEnabledLabel) +
      "=\"true\" but has no backend and does not wait: it was created while the webhook was "
      "not registered, or in a namespace the webhook skips (kube-system, gvirtus-system); "
      "re-create it";
  return out;
}

}  // namespace gvirtus::kubectl_gvirtus
