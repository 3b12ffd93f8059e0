#include "backend-shim/peer_check.h"

#include "backend-shim/backend/config.h"
#include "backend-shim/options.h"
#include "common/kube/api/resource.h"
#include "common/telemetry/log.h"

namespace gvirtus::backend_shim {
namespace {

// The guard waits this much longer than the gate for an address not listed: the gate
// answers at the end of --peer-wait, and its answer must not be lost to a race.
constexpr auto kGuardTimeoutMargin = std::chrono::seconds(2);

}  // namespace

PeerCheck::PeerCheck(PassKey, const Options& options) : options_(options) {}

PeerCheck::~PeerCheck() {
  if (cache_) {
    cache_->stop();
  }
}

Result<std::unique_ptr<PeerCheck>> PeerCheck::start(const Options& options, KubeClient& client,
                                                    ShimMetrics& metrics) {
  auto check = std::make_unique<PeerCheck>(PassKey{}, options);
  PeerGateOptions gateOptions;
  gateOptions.wait = options.peerWait;
  gateOptions.onAnswer = [&metrics](bool allowed) { metrics.observeSession(allowed); };
  auto gate = PeerGate::start(std::move(gateOptions));
  if (!gate) {
    return fail(gate.error().context("peer check"));
  }
  check->gate_ = std::move(*gate);

  ResourceCacheOptions cacheOptions;
  cacheOptions.transform = peersAnnotationFields;
  check->cache_ =
      std::make_unique<ResourceCache>(client, resources::kPods, options.podNamespace, "",
                                      "metadata.name=" + options.podName, std::move(cacheOptions));
  PeerCheck* self = check.get();
  check->watch_ = std::make_unique<PeerAnnotationWatch>(
      *check->cache_, [self, &metrics](PeerList peers, PeerShares shares) {
        metrics.observePeers(peers.size());
        // The shares first: a pod the gate lets in from now on finds its share.
        {
          std::lock_guard lock(self->sharesMutex_);
          self->shares_ = std::move(shares);
        }
        self->gate_->setPeers(std::move(peers));
      });
  check->cache_->start();
  log::info("peer check on: sessions only from the pods listed in gvirtus.io/peers",
            {{"gate", check->gate_->socketPath()},
             {"guard", options.peerGuardLibrary},
             {"wait", formatDuration(options.peerWait)}});
  return check;
}

std::optional<uint64_t> PeerCheck::gpuMemoryShare(Ipv4 pod) const {
  std::lock_guard lock(sharesMutex_);
  return shares_.bytesOf(pod);
}

std::vector<std::string> PeerCheck::backendEnvironment(const std::vector<std::string>& env) const {
  return withPeerGuard(
      env, PeerGuardSettings{options_.peerGuardLibrary, gate_->socketPath(), options_.port,
                             options_.peerWait + kGuardTimeoutMargin});
}

}  // namespace gvirtus::backend_shim
