#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "backend-shim/peers/list.h"
#include "backend-shim/peers/shares.h"
#include "common/cache/object_cache.h"

namespace gvirtus::backend_shim {

// Turns this backend pod's gvirtus.io/peers annotation into the gate's peer list, and its
// gvirtus.io/peer-memory into the peers' GPU memory shares. The cache holds one object, the
// shim's own pod (a field selector on its name); every change of either annotation's text
// hands both on, other changes of the pod nothing. A pod without gvirtus.io/peers (a webhook
// that does not publish it yet) or deleted has the empty list: the check fails closed. A pod
// without gvirtus.io/peer-memory has no shares (an older webhook): no pod's process is capped.
// Entries that do not parse are skipped with one warning per value of the annotation.
class PeerAnnotationWatch {
 public:
  using Sink = std::function<void(PeerList, PeerShares)>;

  // Adds its handlers to `cache` (before the cache starts); `cache` must outlive it, or be
  // stopped before it goes.
  PeerAnnotationWatch(ObjectCache& cache, Sink sink);

  // Lists handed on.
  int64_t updates() const { return updates_.load(); }

 private:
  // The two annotations' texts; nullopt: absent.
  struct Texts {
    std::optional<std::string> peers;
    std::optional<std::string> shares;
    bool operator==(const Texts&) const = default;
  };
  void apply(const nlohmann::json& pod);
  void publish(Texts texts, PeerList peers, PeerShares shares);

  Sink sink_;
  bool published_ = false;
  Texts texts_;  // as last handed on
  std::atomic<int64_t> updates_{0};
};

// What the watch reads of the pod, for ResourceCacheOptions::transform: its name, namespace,
// resourceVersion, gvirtus.io/peers and gvirtus.io/peer-memory; the rest of the pod is not
// kept.
nlohmann::json peersAnnotationFields(nlohmann::json pod);

}  // namespace gvirtus::backend_shim
