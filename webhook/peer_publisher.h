#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>

#include "common/duration.h"
#include "common/error.h"
#include "common/kube_client.h"
#include "common/leader_controller.h"
#include "common/object_cache.h"
#include "webhook/backend_peers.h"

// The peer publisher (issue 40 item 3): keeps gvirtus.io/peers on every backend pod equal
// to the addresses of the pods assigned to it (webhook/backend_peers.h), which the backend
// shim lets connect and no other address.
namespace gvirtus::webhook {

class WebhookMetrics;

// Writes one JSON merge patch to one backend pod.
using PeerWriter = std::function<Result<void>(const std::string& ns, const std::string& name,
                                              const std::string& mergePatch)>;
PeerWriter peerWriter(KubeClient& client);

struct PeerPublisherOptions {
  int port = 9999;  // the backends' port, as gvirtus.io/backend names them
  size_t maxPeers = kMaxPeers;
  // A GVirtuS pod's change is published this long after it, with every other change to the
  // same list meanwhile: one write, not one per pod, when many pods of a backend start
  // together. The shim waits --peer-wait (3 s) for a connecting address to be listed.
  Duration coalesce = std::chrono::milliseconds(500);
  // A failed write comes back after these, per backend pod (as the waiting-pod controller).
  Duration backoffInitial = std::chrono::milliseconds(500);
  Duration backoffMax = std::chrono::seconds(30);
};

// On the shared controller loop (common/controller.h), one key per backend pod
// ("namespace/name"): a change of a GVirtuS pod's claim (peerClaim()) queues the backend
// pods it named before and after, `coalesce` later; a change of a backend pod's address or of its
// gvirtus.io/peers queues that pod; gaining leadership (run(), once the caches have synced)
// queues every backend pod. sync(key) writes at most one merge patch of that one annotation,
// once the pod has an address, and only when the value differs from what the pod carries
// (an empty list too: "" tells the shim there is none). Event-driven: a new frontend
// pod connects within a second or two of getting its address, and the shim waits only a few
// seconds for the list to name it.
//
// The claims are indexed by backend pod as the GVirtuS pods' cache changes, on every
// replica (the handlers run whether or not this one leads): a sync reads the claims on its
// backend, as the cache's last event of each pod left them, and no pod.
class PeerPublisher {
 public:
  // Adds its handlers to both caches, which must not have started: `backendPods` (the
  // backend pods) and `frontendPods` (the GVirtuS pods, frontendFields() of
  // webhook/cluster_backend_source.h is enough). `metrics` may be null. All must outlive
  // the publisher.
  PeerPublisher(ObjectCache& backendPods, ObjectCache& frontendPods, PeerWriter write,
                WebhookMetrics* metrics, PeerPublisherOptions options = {});

  // The leader's work: runs until `stop`. May run again after it returned.
  void run(std::stop_token stop);

  // Brings gvirtus.io/peers of one backend pod ("namespace/name") to what it should be;
  // true when it wrote. A backend pod not in the cache (gone) is no error.
  Result<bool> sync(const std::string& backendPod);

 private:
  void frontendChanged(const nlohmann::json* old, const nlohmann::json* now);
  void enqueue(const std::string& backendPod, Duration after = Duration::zero());
  void enqueueAll();

  ObjectCache& backendPods_;
  ObjectCache& frontendPods_;
  const PeerWriter write_;
  WebhookMetrics* metrics_;
  const PeerPublisherOptions options_;
  LeaderController leader_;
  std::atomic<bool> warnedCap_ = false;

  std::mutex mutex_;
  // By backend pod, then by GVirtuS pod ("namespace/name"): the claims that name it.
  std::map<std::string, std::map<std::string, PeerClaim>> claims_;
  // By backend pod: what was last written, and the resourceVersion it was written over.
  // While the cache still holds that version, the write stands in for it: a sync before
  // the watch brings the patched pod does not write the same value again.
  struct Written {
    std::string fromResourceVersion;
    std::string value;
  };
  std::map<std::string, Written> written_;
};

}  // namespace gvirtus::webhook
