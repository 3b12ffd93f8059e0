#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/contract/backend_load.h"
#include "kubectl-gvirtus/lost_backends.h"
#include "kubectl-gvirtus/pod_events.h"
#include "kubectl-gvirtus/pod_facts.h"
#include "kubectl-gvirtus/waiting_reason.h"

// What the plugin shows, computed from the objects it read (pods, Events): plain
// functions over JSON, so that tests need no cluster.
namespace gvirtus::kubectl_gvirtus {

// One backend pod and what its shim reports in gvirtus.io/load.
struct BackendView {
  std::string ns;
  std::string name;
  std::string node;
  std::string endpoint;  // IP:PORT, empty without a pod IP
  bool ready = false;
  std::optional<TimePoint> readySince;  // when it became Ready, if it is
  std::optional<BackendLoad> load;
  std::string loadError;  // an unreadable annotation
  std::optional<std::chrono::seconds> loadAge;
  int64_t pods = 0;  // GVirtuS pods given this backend that have not finished
  // GPU memory those pods hold as shares (gvirtus.io/backend-gpu), in MiB of the GPUs the
  // load report shows: what the webhook counts as taken beside the reported use.
  int64_t heldMiB = 0;
};

// A pod behind the scheduling gate gvirtus.io/backend.
struct WaitingView {
  std::string ns;
  std::string name;
  std::chrono::seconds age{0};
  std::string reason;  // the latest reason, with a note when it is out of date
  std::optional<std::chrono::seconds> reasonAge;  // since it was recorded
};

// The answer to `why POD`.
struct PodExplanation {
  // Claim: a DRA claimant (gvirtus.io/dra, docs/dra.md), whose backend kube-scheduler
  // allocated through its claim.
  enum class State { NotGvirtus, Assigned, Waiting, NoBackend, BackendLost, Claim };
  State state = State::NotGvirtus;
  std::string ns;
  std::string name;
  std::string phase;
  std::string node;
  std::string backend;     // gvirtus.io/backend
  std::string backendPod;  // gvirtus.io/backend-pod
  std::optional<BackendView> backendView;
  std::optional<LostView> lost;   // State::BackendLost
  std::string summary;            // one sentence
  std::vector<EventView> events;  // oldest first
};

// Backends among `backendPods` (sorted by node, then name), with the GVirtuS pods among
// `gvirtusPods` assigned to each.
std::vector<BackendView> backendViews(const std::vector<nlohmann::json>& backendPods,
                                      const std::vector<nlohmann::json>& gvirtusPods, int port,
                                      TimePoint now);

// How many backends are ready, and which became Ready last.
BackendCount countBackends(const std::vector<BackendView>& backends);

// Waiting pods among `gvirtusPods`, oldest first, each with the message of its latest
// WaitingForBackend Event, weighed against `backends`.
std::vector<WaitingView> waitingViews(const std::vector<nlohmann::json>& gvirtusPods,
                                      const PodEvents& events,
                                      const std::vector<BackendView>& backends, TimePoint now);

// The pod's backend, or why it has none, from its labels, annotations, gate and Events, and
// the backends (`backendPods`, as listed, tell whether its backend went away).
PodExplanation explainPod(const nlohmann::json& pod, const std::vector<nlohmann::json>& events,
                          const std::vector<BackendView>& backends, const BackendPods& backendPods,
                          TimePoint now);

const char* stateName(PodExplanation::State state);

}  // namespace gvirtus::kubectl_gvirtus
