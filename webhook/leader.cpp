#include "webhook/leader.h"

#include <utility>
#include <vector>

#include "common/kube/connect.h"
#include "common/process/flags.h"
#include "common/process/signals.h"
#include "common/telemetry/log.h"
#include "webhook/base/names.h"
#include "webhook/dra/device_taint_rule.h"
#include "webhook/dra/slice.h"
#include "webhook/peers/claim_peers.h"

namespace gvirtus::webhook {
namespace {

// The Lease of --leader-elect, in the webhook's namespace (manifests/webhook/rbac.yaml).
constexpr const char* kLeaseName = "gvirtus-webhook";

}  // namespace

KubeClientOptions webhookClientOptions(Duration requestTimeout, int maxRetries) {
  KubeClientOptions out;
  out.requestTimeout = requestTimeout;
  out.maxRetries = maxRetries;
  out.cancel = ShutdownSignal::install().deadline(kShutdownClientGrace);
  return out;
}

Result<std::unique_ptr<KubeClient>> connectWebhookClient(const Options& options,
                                                         KubeClientOptions clientOptions) {
  return connectKubeClient(kProgram, options.common.kubeconfig, std::move(clientOptions));
}

Leader::Leader(const Options& options, std::string identity)
    : options_(options), identity_(std::move(identity)) {}

Leader::~Leader() {
  stop();
  stopFeeds();
}

Result<std::unique_ptr<Leader>> Leader::build(const LeaderInputs& inputs) {
  std::unique_ptr<Leader> leader(new Leader(inputs.options, inputs.identity));
  if (auto made = leader->makeEvents(inputs); !made) {
    return fail(made.error());
  }
  leader->makeReleaseController(inputs);
  if (inputs.cluster != nullptr && inputs.options.dra) {
    leader->makeSlices(inputs);
  }
  if (inputs.cluster != nullptr) {
    leader->peers_ = std::make_unique<PeerPublisher>(
        inputs.cluster->backendPods(), inputs.cluster->frontendPods(), peerWriter(inputs.client),
        &inputs.metrics, PeerPublisherOptions{.port = inputs.cluster->port()},
        ClaimantCaches{leader->claimCache_.get(), leader->claimantCache_.get()});
    if (inputs.options.backendLostGrace > Duration::zero()) {
      if (auto made = leader->makeFollower(inputs); !made) {
        return fail(made.error());
      }
    }
  }
  if (inputs.options.leaderElect) {
    if (auto made = leader->makeElector(inputs); !made) {
      return fail(made.error());
    }
  }
  // Last, once nothing can fail: a Leader given up above is never called back.
  Leader* self = leader.get();
  inputs.source.setOnChange([self] {
    self->controller_->backendsChanged();
    if (self->slices_) {
      self->slices_->backendsChanged();
    }
    if (self->binder_) {
      self->binder_->backendsChanged();
    }
  });
  return leader;
}

// Events get their own client, so that a burst of them never holds up a release behind the
// client's rate limit.
Result<void> Leader::makeEvents(const LeaderInputs& inputs) {
  auto client = connectWebhookClient(options_, webhookClientOptions(std::chrono::seconds(10)));
  if (!client) {
    return fail(client.error());
  }
  eventsClient_ = std::move(*client);
  EventRecorderOptions eventOptions;
  eventOptions.component = kProgram;
  eventOptions.host = envOr("NODE_NAME", "");
  eventOptions.instance = inputs.identity;
  events_ = std::make_unique<EventRecorder>(*eventsClient_, eventOptions);
  return {};
}

// The waiting-pod controller, and the autoscaler it tells the parked units' demand (with
// --autoscale-candidates, never with static backends: options.cpp).
void Leader::makeReleaseController(const LeaderInputs& inputs) {
  WaitingPodControllerOptions controllerOptions;
  controllerOptions.ownNamespace = options_.ns;
  controllerOptions.plugins = options_.plugins;
  if (inputs.cluster != nullptr) {
    controllerOptions.gvirtusPods = &inputs.cluster->frontendPods();
    if (options_.autoscale.enabled()) {
      autoscaler_ =
          std::make_unique<AutoscaleController>(inputs.client, inputs.cluster->frontendPods(),
                                                *events_, &inputs.metrics, options_.autoscale);
      controllerOptions.onDemand = [this](std::vector<CapacityDemand> demand,
                                          BackendSnapshot backends) {
        autoscaler_->demandSeen(std::move(demand), std::move(backends));
      };
    }
  }
  controller_ = std::make_unique<WaitingPodController>(
      inputs.client, inputs.source, inputs.chooser, *events_, &inputs.metrics, controllerOptions);
}

// With --dra: the slices of the backends' GPUs; every claim is watched and only this
// driver's, compacted, are kept; of the pods only those labelled gvirtus.io/dra=true that
// use claims.
void Leader::makeSlices(const LeaderInputs& inputs) {
  // Device taints, where the API server serves them: a draining backend's devices stay
  // published tainted NoSchedule, and a lost one's are tainted NoExecute (the follower).
  std::string whyNot;
  deviceTaints_ = taintRulesUsable(inputs.client, whyNot);
  if (!deviceTaints_) {
    log::info(
        "no device taints: a draining backend's slice is withdrawn, and claimants of a lost "
        "backend are deleted or marked by the follower, not evicted for a taint",
        {{"why", whyNot}});
  }
  const bool binding = options_.draBindingTimeout > Duration::zero() &&
                       bindingConditionsServed(inputs.client, whyNot);
  if (!binding) {
    log::info("no binding conditions: kube-scheduler binds a claimant without asking its backend",
              {{"why", options_.draBindingTimeout > Duration::zero() ? whyNot
                                                                     : "--dra-binding-timeout=0"}});
  }
  sliceCache_ =
      std::make_unique<ResourceCache>(inputs.client, kResourceSlices, "", "", sliceFieldSelector());
  slices_ = std::make_unique<SlicePublisher>(
      inputs.source, *sliceCache_, sliceApi(inputs.client),
      SlicePublisherOptions{.taintDraining = deviceTaints_, .bindingConditions = binding});
  ResourceCacheOptions claimOptions;
  claimOptions.keep = isGvirtusClaim;
  claimOptions.transform = compactClaim;
  // Without the claims (a ClusterRole older than --dra, an API server without
  // resource.k8s.io/v1) no claimant is a peer, and the GVirtuS pods' lists go on.
  claimOptions.absentMeansEmpty = true;
  claimCache_ = std::make_unique<ResourceCache>(inputs.client, dra::kResourceClaims, "", "", "",
                                                claimOptions);
  // The binder runs even where this replica's devices carry no conditions: claims that a
  // leader before it published with them still wait for an answer.
  if (options_.draBindingTimeout > Duration::zero()) {
    binder_ = std::make_unique<ClaimBinder>(
        inputs.source, *claimCache_, inputs.chooser, bindingStatusApply(inputs.client),
        ClaimBinderOptions{.timeout = options_.draBindingTimeout, .events = events_.get()});
  }
  ResourceCacheOptions claimantOptions;
  claimantOptions.keep = usesClaims;
  claimantOptions.transform = compactClaimant;
  claimantCache_ = std::make_unique<ResourceCache>(
      inputs.client, resources::kPods, "", std::string(kDraLabel) + "=true", "", claimantOptions);
}

// Pods whose backend pod went away are recreated or marked. Its own client: a burst of
// deletes never holds up releases (of the pods their owners create again, too) behind the
// client's rate limit.
Result<void> Leader::makeFollower(const LeaderInputs& inputs) {
  auto client = connectWebhookClient(options_, webhookClientOptions(std::chrono::seconds(10)));
  if (!client) {
    return fail(client.error());
  }
  followerClient_ = std::move(*client);
  BackendFollowerOptions followerOptions;
  followerOptions.backendNamespace = options_.backendNamespace;
  followerOptions.grace = options_.backendLostGrace;
  followerOptions.taintLostDevices = deviceTaints_;
  follower_ = std::make_unique<BackendFollower>(
      inputs.cluster->backendPods(), inputs.cluster->frontendPods(), followerApi(*followerClient_),
      events_.get(), &inputs.metrics, followerOptions,
      ClaimantCaches{claimCache_.get(), claimantCache_.get()});
  return {};
}

Result<void> Leader::makeElector(const LeaderInputs& inputs) {
  // A renewal must end well within the renew deadline (see LeaderElector).
  auto client = connectWebhookClient(
      options_, webhookClientOptions(options_.leaderElectRenewDeadline / 3, 0));
  if (!client) {
    return fail(client.error());
  }
  electionClient_ = std::move(*client);
  LeaderElectionConfig election;
  election.ns = options_.ns;
  election.name = kLeaseName;
  election.identity = identity_;
  election.leaseDuration = options_.leaderElectLeaseDuration;
  election.renewDeadline = options_.leaderElectRenewDeadline;
  election.retryPeriod = options_.leaderElectRetryPeriod;
  // The two replicas break the chooser's ties in opposite orders (TieOrder).
  BackendChooser& chooser = inputs.chooser;
  chooser.setTieOrder(TieOrder::Descending);
  election.onStartedLeading = [this, &chooser](std::stop_token stop) {
    chooser.setTieOrder(TieOrder::Ascending);
    runControllers(stop);
    chooser.setTieOrder(TieOrder::Descending);
  };
  elector_ = std::make_unique<LeaderElector>(*electionClient_, election);
  return {};
}

void Leader::startFeeds() {
  forEachFeed(&ResourceCache::start);
}

void Leader::stopFeeds() {
  forEachFeed(&ResourceCache::stop);
}

void Leader::forEachFeed(void (ResourceCache::*step)()) {
  for (ResourceCache* cache : {sliceCache_.get(), claimCache_.get(), claimantCache_.get()}) {
    if (cache != nullptr) {
      (cache->*step)();
    }
  }
}

Result<void> Leader::start() {
  events_->start();
  if (elector_) {
    return elector_->start();
  }
  controllers_ = std::jthread([this](std::stop_token stop) { runControllers(stop); });
  return {};
}

void Leader::stop() {
  // Leadership is given up (the Lease released, so that another replica takes over at
  // once) only after the controllers' work has ended.
  if (elector_) {
    elector_->stop();
  }
  if (controllers_.joinable()) {
    controllers_.request_stop();
    controllers_.join();
  }
  if (events_) {
    events_->stop();
  }
}

std::string Leader::mode() const {
  return elector_ ? "when leading (Lease " + options_.ns + "/" + kLeaseName + ", identity " +
                        identity_ + ")"
                  : "on";
}

void Leader::runControllers(std::stop_token stop) {
  std::vector<std::jthread> others;
  auto runBeside = [&others](auto* part) {
    if (part != nullptr) {
      others.emplace_back([part](std::stop_token own) { part->run(own); });
    }
  };
  runBeside(autoscaler_.get());
  runBeside(peers_.get());
  runBeside(follower_.get());
  runBeside(slices_.get());
  runBeside(binder_.get());
  std::stop_callback endOthers(stop, [&others] {
    for (auto& thread : others) {
      thread.request_stop();
    }
  });
  controller_->run(stop);
}

}  // namespace gvirtus::webhook
