#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/contract/backend_load.h"
#include "common/contract/gpu_share.h"

namespace gvirtus::webhook {

// A GVirtuS pod given a backend, as the webhook replicas see it in the cluster: when it
// was created and which webhook instance assigned it (gvirtus.io/assigned-by; empty when
// none says). A replica counts the others' from these, and its own from memory: one of its
// own seen here confirms that an assignment it made at admission was for a real pod.
struct AssignedPod {
  std::chrono::system_clock::time_point created;
  std::string assignedBy;
  std::string pod = {};  // "namespace/name"
  // The backend pod it was given (gvirtus.io/backend-pod): a new backend pod that reuses
  // an old one's IP does not inherit the old one's pods.
  std::string backendPod = {};

  bool operator==(const AssignedPod&) const = default;
};

// A GVirtuS backend a frontend can be given: a backend pod, or a static address.
struct Backend {
  std::string ip;  // dotted IPv4
  int port = 0;
  std::string podNamespace;  // empty for static backends
  std::string podName;
  std::string node;
  std::string zone;  // the node's topology.kubernetes.io/zone; empty when unknown
  std::optional<BackendLoad> load;
  // Its node carries gvirtus.io/backend.draining: the autoscaler is about to opt it out, so
  // it takes no new pods.
  bool draining = false;
  // The shares of the pods it was given (from the cluster's pods; none for static backends).
  std::vector<GpuShare> shares;
  // The GVirtuS pods it was given that have not finished and were created within the
  // assignment window (from the cluster's pods; none for static backends): what the other
  // webhook replicas assigned lately.
  std::vector<AssignedPod> assigned;
  // The GVirtuS pods it was given that have not finished, whenever created: each holds a
  // session, or will. The chooser never counts fewer connections than this, whatever the
  // backend's own load report says (a taken shim could report none and draw every pod).
  int64_t wired = 0;
  // Positions in `assigned` in the order of their pods' names (indexAssigned()), so that
  // the chooser finds a reservation's pod in each review of a burst without indexing a
  // list of thousands each time: it is indexed once per build of the backend list. Not
  // indexed when its size is not `assigned`'s.
  std::vector<uint32_t> assignedByName;

  // "IP:PORT": what the frontend connects to, and the backend's identity.
  std::string endpoint() const { return ip + ":" + std::to_string(port); }
  // "namespace/name"; empty for static backends.
  std::string podRef() const { return podName.empty() ? "" : podNamespace + "/" + podName; }
  // The same backend without `shares` and `assigned`, as a choice carries it: those lists
  // grow long during a burst of pods, and a choice is copied on.
  Backend withoutPods() const {
    return Backend{.ip = ip,
                   .port = port,
                   .podNamespace = podNamespace,
                   .podName = podName,
                   .node = node,
                   .zone = zone,
                   .load = load,
                   .draining = draining,
                   .shares = {},
                   .assigned = {},
                   .wired = wired,
                   .assignedByName = {}};
  }
  void indexAssigned() {
    assignedByName.resize(assigned.size());
    for (uint32_t i = 0; i < assignedByName.size(); ++i) {
      assignedByName[i] = i;
    }
    std::ranges::sort(assignedByName, {},
                      [&](uint32_t i) -> const std::string& { return assigned[i].pod; });
  }
  // The pod of `assigned` named `pod` ("namespace/name"); null when there is none.
  const AssignedPod* assignedPod(std::string_view pod) const {
    if (assignedByName.size() != assigned.size()) {
      const auto found = std::ranges::find(assigned, pod, &AssignedPod::pod);
      return found == assigned.end() ? nullptr : &*found;
    }
    const auto at = std::ranges::lower_bound(
        assignedByName, pod, {}, [&](uint32_t i) -> std::string_view { return assigned[i].pod; });
    return at != assignedByName.end() && assigned[*at].pod == pod ? &assigned[*at] : nullptr;
  }
  bool operator==(const Backend&) const = default;
};

}  // namespace gvirtus::webhook
