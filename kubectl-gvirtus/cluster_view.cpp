#include "kubectl-gvirtus/cluster_view.h"

#include <algorithm>
#include <tuple>

#include "common/base/json_access.h"
#include "common/contract/gpu_share.h"
#include "common/contract/labels.h"
#include "common/contract/pod_origin.h"
#include "common/contract/pod_status.h"

namespace gvirtus::kubectl_gvirtus {
namespace {

using nlohmann::json;

std::string lostSummary(const LostView& lost, TimePoint now) {
  std::string out = "lost its GVirtuS backend " + lost.backend + " (backend pod " +
                    lost.backendPod + "): " + lost.detail + "; done: ";
  if (lost.action) {
    out += actionText(lost, now);
  } else {
    out +=
        "nothing yet (the webhook's leader acts once the backend is gone, or not Ready "
        "past its grace period)";
  }
  if (lost.deleting) {
    out += "; the pod is being deleted";
  }
  return out;
}

}  // namespace

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
    case PodExplanation::State::BackendLost:
      return "backend-lost";
    case PodExplanation::State::Claim:
      return "claim";
  }
  return "not-gvirtus";
}

std::vector<BackendView> backendViews(const std::vector<json>& backendPods,
                                      const std::vector<json>& gvirtusPods, int port,
                                      TimePoint now) {
  // The GPU shares of the GVirtuS pods, by backend endpoint, read once for all backends.
  std::vector<std::pair<std::string, GpuShare>> shares;
  for (const auto& p : gvirtusPods) {
    if (auto held = heldShare(p)) {
      shares.push_back(std::move(*held));
    }
  }
  std::vector<BackendView> out;
  for (const auto& pod : backendPods) {
    if (isDeleting(pod) && !podReady(pod)) {
      continue;  // going away
    }
    if (isMirrorPod(pod)) {
      continue;  // a node's static pod, never a backend (the webhook skips it too)
    }
    BackendView view;
    view.ns = stringAt(pod, {"metadata", "namespace"});
    view.name = stringAt(pod, {"metadata", "name"});
    view.node = stringAt(pod, {"spec", "nodeName"});
    const std::string ip = podIpv4(pod);
    view.endpoint = ip.empty() ? "" : ip + ":" + std::to_string(port);
    view.ready = podReady(pod) && !ip.empty();
    if (view.ready) {
      view.readySince = podReadySince(pod);
    }
    if (const std::string text = annotationOf(pod, names::kLoadAnnotation); !text.empty()) {
      if (auto load = parseBackendLoad(text)) {
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
      return !podFinished(p) && annotationOf(p, names::kBackendPodAnnotation) == ref;
    });
    for (const auto& [endpoint, share] : shares) {
      if (!view.load || endpoint != view.endpoint) {
        continue;
      }
      for (const auto& gpu : view.load->gpus) {
        if (gpu.index == share.gpuIndex) {
          view.heldMiB += memoryDemandMiB(share.demand, gpu.memoryTotalMiB);
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

BackendCount countBackends(const std::vector<BackendView>& backends) {
  BackendCount out;
  out.total = static_cast<int64_t>(backends.size());
  for (const auto& b : backends) {
    if (!b.ready) {
      continue;
    }
    ++out.ready;
    if (b.readySince && (!out.lastReadyAt || *b.readySince > *out.lastReadyAt)) {
      out.lastReadyAt = b.readySince;
      out.lastReadyName = b.name;
    }
  }
  return out;
}

std::vector<WaitingView> waitingViews(const std::vector<json>& gvirtusPods, const PodEvents& events,
                                      const std::vector<BackendView>& backends, TimePoint now) {
  const BackendCount count = countBackends(backends);
  std::vector<std::pair<TimePoint, WaitingView>> ranked;
  for (const auto& pod : gvirtusPods) {
    if (!isGated(pod) || isDeleting(pod)) {
      continue;
    }
    const auto created = timeAt(pod, {"metadata", "creationTimestamp"});
    const WaitingReason reason = waitingReason(events.of(pod), count);
    WaitingView view{stringAt(pod, {"metadata", "namespace"}), stringAt(pod, {"metadata", "name"}),
                     since(created, now), shortText(reason, count), std::nullopt};
    if (reason.at) {
      view.reasonAge = since(reason.at, now);
    }
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
                          const std::vector<BackendView>& backends, const BackendPods& backendPods,
                          TimePoint now) {
  PodExplanation out;
  out.ns = stringAt(pod, {"metadata", "namespace"});
  out.name = stringAt(pod, {"metadata", "name"});
  out.phase = stringAt(pod, {"status", "phase"});
  out.node = stringAt(pod, {"spec", "nodeName"});
  out.backend = annotationOf(pod, names::kBackendAnnotation);
  out.backendPod = annotationOf(pod, names::kBackendPodAnnotation);
  out.events = PodEvents(events).of(pod);

  if (isGated(pod)) {
    out.state = PodExplanation::State::Waiting;
    const auto age = since(timeAt(pod, {"metadata", "creationTimestamp"}), now);
    const BackendCount count = countBackends(backends);
    out.summary = "waits for a GVirtuS backend (scheduling gate " +
                  std::string(names::kSchedulingGate) + ", " + formatAge(age) +
                  "): " + longText(waitingReason(out.events, count), count, now);
    return out;
  }
  if (!out.backend.empty()) {
    out.state = PodExplanation::State::Assigned;
    if (out.backendPod.empty()) {
      out.summary = "uses the GVirtuS backend " + out.backend +
                    " (a static backend, outside the "
                    "cluster)";
      return out;
    }
    auto it = std::find_if(backends.begin(), backends.end(), [&](const BackendView& b) {
      return b.ns + "/" + b.name == out.backendPod;
    });
    if (it != backends.end()) {
      out.backendView = *it;
    }
    if (auto lost = lostBackend(pod, backendPods, out.events, now)) {
      out.state = PodExplanation::State::BackendLost;
      out.summary = lostSummary(*lost, now);
      out.lost = std::move(lost);
      return out;
    }
    out.summary = "uses the GVirtuS backend " + out.backend + " (backend pod " + out.backendPod;
    if (it == backends.end()) {
      out.summary += ", not among the backend pods in " + backendPods.ns + ")";
    } else {
      out.summary += " on node " + it->node + (it->ready ? "" : ", not Ready now") + ")";
    }
    return out;
  }
  if (const json* claims = memberAt(pod, {"spec", "resourceClaims"});
      labelOf(pod, names::kDraLabel) == "true" && claims != nullptr && !claims->empty()) {
    out.state = PodExplanation::State::Claim;
    out.summary =
        "gets its GPU through a DRA claim (DeviceClass gpu.gvirtus.io): kube-scheduler "
        "allocates its backend, and `kubectl get resourceclaims -n " +
        out.ns + "` shows which (docs/dra.md)";
    return out;
  }
  if (labelOf(pod, names::kEnabledLabel) != "true") {
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
