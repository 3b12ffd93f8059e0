#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/contract/backend_load.h"
#include "common/contract/gpu_share.h"

// Which pods may open sessions on a backend pod (issue 40 item 3): the decision behind the
// annotation gvirtus.io/peers, which the backend shim enforces on every connection. GVirtuS
// has no authentication of its own: a source address the list leaves out is refused.
//
// Tenants create pods with any labels and annotations they like; what can be trusted is
// what the webhook wrote at admission (it overwrites every gvirtus.io/ annotation of a
// labelled pod at CREATE) or at release, and the ValidatingAdmissionPolicies keep anyone
// else from changing afterwards (manifests/policy/pod-keys.yaml). So a pod counts only as
// the webhook left it, and only for the backend pod it names at that pod's current address.
namespace gvirtus::webhook {

// The most addresses one list holds: 10,000 addresses of at most 16 bytes stay well under
// the API server's 256 KiB for all of a pod's annotations (a longer list would be refused
// whole), and far above the sessions one backend takes.
inline constexpr size_t kMaxPeers = 10000;
// The most shares gvirtus.io/peer-memory holds: 2,000 entries of at most 27 bytes
// ("255.255.255.255=1073741824,") beside a full list still fit in 256 KiB. Peers past it
// are not capped (they are far past any backend's --max-sessions).
inline constexpr size_t kMaxShares = 2000;

// What a GVirtuS pod stands for in a peer list.
struct PeerClaim {
  std::string backendPod;  // gvirtus.io/backend-pod: "namespace/name"
  std::string endpoint;    // gvirtus.io/backend: "IP:PORT"
  std::string ip;          // the pod's own IPv4 address
  // The GPU memory it holds on the backend (heldShare()); none: the whole GPU is its to use.
  std::optional<GpuShare> share;

  bool operator==(const PeerClaim&) const = default;
};

// A pod's claim, when it is a peer of any backend at all: labelled gvirtus.io/enabled=true;
// given a backend and a backend pod (assignedPod() of webhook/placement/cluster_source.h:
// not finished, not being deleted); released (no scheduling gate gvirtus.io/backend left,
// isWaiting() of webhook/pods/pod_wiring.h); with an IPv4 address (podIpv4()).
// nullopt otherwise.
std::optional<PeerClaim> peerClaim(const nlohmann::json& pod);

// "IP:PORT" of a backend pod at its current IPv4 address; empty when it has none.
std::string backendEndpoint(const nlohmann::json& backendPod, int port);

// Whether `claim` counts for the backend pod "namespace/name" now at `endpoint`: it names
// that pod AND that address. A new backend pod that reuses an old one's IP, or an old one
// whose name a new pod's annotation happens to carry, gets none of the other's pods.
bool claimsBackend(const PeerClaim& claim, std::string_view backendPod, std::string_view endpoint);

// The addresses of those of `claims` that count for the backend pod "namespace/name" now at
// `endpoint` (claimsBackend()): in address order, each once. None without an endpoint.
std::vector<std::string> backendPeers(std::string_view backendPod, std::string_view endpoint,
                                      const std::vector<PeerClaim>& claims);

// The annotation's value: the first `max` of `peers` joined by commas; "" for none.
std::string peersValue(const std::vector<std::string>& peers, size_t max = kMaxPeers);

// An address and its GPU memory share in MiB.
using PeerShare = std::pair<std::string, int64_t>;

// The shares of those of `claims` that count for the backend pod (as backendPeers()) and hold
// one, in address order, each address once (its smallest share): what the pod asked for
// (memoryDemandMiB()), a fraction of the total of the GPU it was given as `gpus` (the
// backend's load report) says. A share that comes to 0 MiB (a fraction of a GPU the report
// does not list yet) is left out: that pod is not capped until the report says.
std::vector<PeerShare> backendPeerShares(std::string_view backendPod, std::string_view endpoint,
                                         const std::vector<PeerClaim>& claims,
                                         const std::vector<GpuLoad>& gpus);

// gvirtus.io/peer-memory's value: "IP=MiB" entries of the first `max` of `shares`, joined by
// commas; "" for none.
std::string peerMemoryValue(const std::vector<PeerShare>& shares, size_t max = kMaxPeers);

}  // namespace gvirtus::webhook
