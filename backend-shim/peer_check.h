#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend-shim/load/metrics.h"
#include "backend-shim/peers/annotation_watch.h"
#include "backend-shim/peers/gate.h"
#include "backend-shim/peers/shares.h"
#include "common/base/error.h"
#include "common/cache/resource_cache.h"
#include "common/kube/client.h"

namespace gvirtus::backend_shim {

struct Options;

// --peer-check as the shim runs it: the gate the backend's guard asks, its peer list kept
// equal to this pod's gvirtus.io/peers by a watch of the pod, and the backend's environment
// that preloads the guard. Until the watch has read the pod, every question waits and then
// is refused.
class PeerCheck {
 public:
  // Starts the gate and the watch of options.podNamespace/options.podName through `client`
  // (which must outlive it); the answers and the list's size go to `metrics`.
  static Result<std::unique_ptr<PeerCheck>> start(const Options& options, KubeClient& client,
                                                  ShimMetrics& metrics);
  // The watch stops before the gate goes.
  ~PeerCheck();
  PeerCheck(const PeerCheck&) = delete;
  PeerCheck& operator=(const PeerCheck&) = delete;

  // `env` with the guard preloaded and told where the gate is (withPeerGuard).
  std::vector<std::string> backendEnvironment(const std::vector<std::string>& env) const;
  const PeerGate& gate() const { return *gate_; }
  // The GPU memory share of the pod at `pod` in bytes, from gvirtus.io/peer-memory; nullopt:
  // none. Any thread.
  std::optional<uint64_t> gpuMemoryShare(Ipv4 pod) const;
  // The drain: every new session is refused from now on (PeerGate::refuseNewSessions).
  void refuseNewSessions() { gate_->refuseNewSessions(); }

  class PassKey {
    friend class PeerCheck;
    explicit PassKey() = default;
  };
  PeerCheck(PassKey, const Options& options);

 private:
  const Options& options_;
  mutable std::mutex sharesMutex_;
  PeerShares shares_;  // guarded by sharesMutex_
  // In this order: the cache is stopped first, its handlers call the watch, which feeds the
  // gate.
  std::unique_ptr<PeerGate> gate_;
  std::unique_ptr<PeerAnnotationWatch> watch_;
  std::unique_ptr<ResourceCache> cache_;
};

}  // namespace gvirtus::backend_shim
