#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "backend-shim/peer_list.h"
#include "common/object_cache.h"

namespace gvirtus::backend_shim {

// Turns this backend pod's gvirtus.io/peers annotation into the gate's peer list. The cache
// holds one object, the shim's own pod (a field selector on its name); every change of the
// annotation's text hands the parsed list on, other changes of the pod nothing. A pod without
// the annotation (a webhook that does not publish it yet) or deleted has the empty list: the
// check fails closed. Entries that are not IPv4 addresses are skipped with one warning per
// value of the annotation.
class PeerAnnotationWatch {
 public:
  using Sink = std::function<void(PeerList)>;

  // Adds its handlers to `cache` (before the cache starts); `cache` must outlive it, or be
  // stopped before it goes.
  PeerAnnotationWatch(ObjectCache& cache, Sink sink);

  // Lists handed on.
  int64_t updates() const { return updates_.load(); }

 private:
  void apply(const nlohmann::json& pod);
  void publish(std::optional<std::string> text, PeerList peers);

  Sink sink_;
  bool published_ = false;
  std::optional<std::string> text_;  // the annotation last handed on; nullopt: absent
  std::atomic<int64_t> updates_{0};
};

// What the watch reads of the pod, for ResourceCacheOptions::transform: its name, namespace,
// resourceVersion and gvirtus.io/peers; the rest of the pod is not kept.
nlohmann::json peersAnnotationFields(nlohmann::json pod);

}  // namespace gvirtus::backend_shim
