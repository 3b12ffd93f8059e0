#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "common/base/error.h"
#include "common/cache/object_cache.h"
#include "common/controller/leader_controller.h"
#include "common/kube/client.h"
#include "common/time/duration.h"
#include "webhook/peers/backend_peers.h"
#include "webhook/peers/claim_peers.h"

// The peer publisher (issue 40 item 3): keeps gvirtus.io/peers on every backend pod equal
// to the addresses of the pods assigned to it (webhook/peers/backend_peers.h), which the backend
// shim lets connect and no other address, and gvirtus.io/peer-memory equal to those pods'
// GPU memory shares, which the shim caps each pod's process at (issue 52 item 3).
namespace gvirtus::webhook {

class WebhookMetrics;

// Writes one JSON merge patch to one backend pod.
using PeerWriter = std::function<Result<void>(const std::string& ns, const std::string& name,
                                              const std::string& mergePatch)>;
PeerWriter peerWriter(KubeClient& client);

// gvirtus.io/peers and gvirtus.io/peer-memory as a backend pod carries them, or as written;
// nullopt: absent.
struct PeerAnnotations {
  std::optional<std::string> peers;
  std::optional<std::string> memory;
  bool operator==(const PeerAnnotations&) const = default;
};

struct PeerPublisherOptions {
  int port = 9999;  // the backends' port, as gvirtus.io/backend names them
  size_t maxPeers = kMaxPeers;
  // A backend pod's list is written at most once in this long: a GVirtuS pod's change after
  // a quiet spell is published at once, and the changes that follow it within this time
  // together at its end. One write, not one per pod, when many pods of a backend start
  // together; the shim waits --peer-wait (3 s) for a connecting address to be listed.
  Duration coalesce = std::chrono::milliseconds(500);
  // A failed write comes back after these, per backend pod (as the waiting-pod controller).
  Duration backoffInitial = std::chrono::milliseconds(500);
  Duration backoffMax = std::chrono::seconds(30);
};

// On the shared controller loop (common/controller/controller.h), one key per backend pod
// ("namespace/name"): a change of a GVirtuS pod's claim (peerClaim()) queues the backend
// pods it named before and after (at most one sync per `coalesce`); a change of a backend pod's
// address or of its gvirtus.io/peers queues that pod; gaining leadership (run(), once the caches
// have synced) queues every backend pod. sync(key) writes at most one merge patch of that one
// annotation pair, once the pod has an address, and only when a value differs from what the pod
// carries (an empty list too: "" tells the shim there is none). Event-driven: a new frontend pod
// connects within a second or two of getting its address, and the shim waits only a few seconds for
// the list to name it.
//
// The claims are indexed by backend pod as the GVirtuS pods' cache changes, on every
// replica (the handlers run whether or not this one leads): a sync reads the claims on its
// backend, as the cache's last event of each pod left them, and no pod.
// With --dra (docs/dra.md), the pods that hold claims count too: a pod kube-scheduler
// reserved a claim for that was allocated a device of gpu.gvirtus.io is a peer of that
// device's backend pod (webhook/peers/claim_peers.h), at its current address (ClaimantCaches).
class PeerPublisher {
 public:
  // Adds its handlers to both caches, which must not have started: `backendPods` (the
  // backend pods) and `frontendPods` (the GVirtuS pods, frontendFields() of
  // webhook/placement/cluster_source.h is enough). `metrics` may be null. All must outlive
  // the publisher.
  PeerPublisher(ObjectCache& backendPods, ObjectCache& frontendPods, PeerWriter write,
                WebhookMetrics* metrics, PeerPublisherOptions options = {},
                ClaimantCaches claimants = {});

  // The leader's work: runs until `stop`. May run again after it returned.
  void run(std::stop_token stop);

  // Brings gvirtus.io/peers of one backend pod ("namespace/name") to what it should be;
  // true when it wrote. A backend pod not in the cache (gone) is no error.
  Result<bool> sync(const std::string& backendPod);

 private:
  using Due = std::vector<std::pair<std::string, Duration>>;
  // The claims granting peers of this backend pod (its address where a pool names it), and
  // the time of this sync, kept for coalescing.
  std::vector<PeerClaim> claimsOn(const std::string& backendPod, const nlohmann::json& pod);
  // What the pod carries as far as this publisher knows: what it wrote over the version the
  // cache still shows, else the pod's own annotations.
  PeerAnnotations carriedBy(const std::string& backendPod, const nlohmann::json& pod);
  // A GVirtuS pod added or changed, or gone.
  void frontendChanged(const nlohmann::json& pod, bool gone);
  // A claim of ours added, changed or gone; a pod that uses claims added, changed or gone.
  void claimChanged(const nlohmann::json& claim, bool gone);
  void claimantChanged(const nlohmann::json& pod);
  // Brings what is indexed for one claim to what its reservations and their pods say now.
  void refreshClaimLocked(const std::string& claimKey, Due& due);
  // Sets (or, nullopt, removes) what `key` stands for; the backend pods to look at again go
  // to `due`.
  void indexLocked(const std::string& key, const std::optional<PeerClaim>& after, Due& due);
  // How long a change to this backend pod's list waits: until `coalesce` after its last sync.
  Duration delayLocked(const std::string& backendPod) const;
  void enqueue(const std::string& backendPod, Duration after = Duration::zero());
  void enqueueAll();

  ObjectCache& backendPods_;
  ObjectCache& frontendPods_;
  const ClaimantCaches claimants_;
  const PeerWriter write_;
  WebhookMetrics* metrics_;
  const PeerPublisherOptions options_;
  LeaderController leader_;
  std::atomic<bool> warnedCap_ = false;

  std::mutex mutex_;
  // By GVirtuS pod ("namespace/name"): its claim, as its cache's last event left it; and
  // by "claim:NAMESPACE/CLAIM#POD@BACKEND POD" a claimant's (its endpoint is the backend
  // pod's at the time of the sync: the pool names the pod, and a pod keeps its address).
  std::map<std::string, PeerClaim> claimOf_;
  // By claim ("namespace/name"): what it grants, and the keys of claimOf_ it stands for.
  std::map<std::string, ClaimPeers> claimPeers_;
  std::map<std::string, std::set<std::string>> indexedOfClaim_;
  // By pod ("namespace/name"): the claims reserved for it.
  std::map<std::string, std::set<std::string>> claimsOfPod_;
  // By backend pod: the GVirtuS pods whose claim names it.
  std::map<std::string, std::set<std::string>> claims_;
  // By backend pod: when its last sync began (the coalescing of changes).
  std::map<std::string, std::chrono::steady_clock::time_point> lastSync_;
  // By backend pod: what was last written, and the resourceVersion it was written over.
  // While the cache still holds that version, the write stands in for it: a sync before
  // the watch brings the patched pod does not write the same value again.
  struct Written {
    std::string fromResourceVersion;
    PeerAnnotations value;
  };
  std::map<std::string, Written> written_;
};

}  // namespace gvirtus::webhook
