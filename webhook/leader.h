#pragma once

#include <memory>
#include <stop_token>
#include <string>
#include <thread>

#include "common/base/error.h"
#include "common/cache/resource_cache.h"
#include "common/controller/event_recorder.h"
#include "common/controller/leader_election.h"
#include "common/kube/client.h"
#include "webhook/autoscale/controller.h"
#include "webhook/base/metrics.h"
#include "webhook/dra/claim_binder.h"
#include "webhook/dra/slice_publisher.h"
#include "webhook/follower/follower.h"
#include "webhook/options.h"
#include "webhook/peers/publisher.h"
#include "webhook/placement/chooser.h"
#include "webhook/placement/cluster_source.h"
#include "webhook/release/controller.h"

namespace gvirtus::webhook {

// What the webhook's leader runs beside admission, wherever there is an API server: the
// waiting-pod controller always; the autoscaler, the peer publisher, the backend follower
// and the DRA slices where their flags and the backend source ask for them. With
// --leader-elect they run only on the replica holding the Lease.
struct LeaderInputs {
  const Options& options;
  KubeClient& client;
  BackendSource& source;
  // The same source when backends are the cluster's pods; null for static backends, which
  // no one watches: no peers, no follower, no autoscaler, no slices.
  ClusterBackendSource* cluster = nullptr;
  BackendChooser& chooser;
  WebhookMetrics& metrics;
  // This replica in the Lease and in its Events.
  std::string identity;
};

class Leader {
 public:
  // Every part the flags ask for, each with its own client where a burst of its requests
  // must not hold up releases; a client that cannot be made is the error. The source's
  // changes are told to the waiting-pod controller and the slices from here on: stop the
  // source (run.cpp does) before the Leader goes away.
  static Result<std::unique_ptr<Leader>> build(const LeaderInputs& inputs);
  ~Leader();
  Leader(const Leader&) = delete;
  Leader& operator=(const Leader&) = delete;

  // The caches the controllers read beside the backend source's (the DRA claims and
  // slices), started with it and stopped with it. stopFeeds() is idempotent.
  void startFeeds();
  void stopFeeds();
  // Starts the Event recorder, then the controllers: at once, or when this replica leads.
  Result<void> start();
  // Ends the controllers' work (and, leading, gives up the Lease), then the recorder.
  void stop();

  // How the controllers run, for the start-up line: "on", or "when leading (Lease ...)".
  std::string mode() const;
  bool publishesPeers() const { return peers_ != nullptr; }
  bool publishesSlices() const { return slices_ != nullptr; }
  bool followsBackends() const { return follower_ != nullptr; }

 private:
  Leader(const Options& options, std::string identity);
  Result<void> makeEvents(const LeaderInputs& inputs);
  void makeReleaseController(const LeaderInputs& inputs);
  void makeSlices(const LeaderInputs& inputs);
  Result<void> makeFollower(const LeaderInputs& inputs);
  Result<void> makeElector(const LeaderInputs& inputs);
  // `step` (start, stop) on each DRA cache that was made.
  void forEachFeed(void (ResourceCache::*step)());
  // The controllers until `stop`, each on its own thread but the waiting-pod controller.
  void runControllers(std::stop_token stop);

  const Options& options_;
  const std::string identity_;
  // Declared so that what a part reads outlives it (members end in reverse order).
  std::unique_ptr<KubeClient> eventsClient_;
  std::unique_ptr<EventRecorder> events_;
  std::unique_ptr<AutoscaleController> autoscaler_;
  std::unique_ptr<WaitingPodController> controller_;
  // With --dra: the ResourceSlices of the backends' GPUs, and the claims allocated from
  // them with the pods that use claims (their addresses are the backends' peers).
  std::unique_ptr<ResourceCache> sliceCache_;
  std::unique_ptr<ResourceCache> claimCache_;
  std::unique_ptr<ResourceCache> claimantCache_;
  std::unique_ptr<SlicePublisher> slices_;
  // With --dra, the API server serves device taints (decided once, in makeSlices()).
  bool deviceTaints_ = false;
  // With --dra and --dra-binding-timeout: answers the binding conditions of claims (the
  // devices carry them where the API server serves them).
  std::unique_ptr<ClaimBinder> binder_;
  std::unique_ptr<PeerPublisher> peers_;
  std::unique_ptr<KubeClient> followerClient_;
  std::unique_ptr<BackendFollower> follower_;
  std::unique_ptr<KubeClient> electionClient_;
  std::unique_ptr<LeaderElector> elector_;
  // Without --leader-elect: the controllers' thread.
  std::jthread controllers_;
};

// A client of the webhook's kubeconfig with this timeout and these retries, its requests
// ended by the shutdown signal.
Result<std::unique_ptr<KubeClient>> connectWebhookClient(const Options& options,
                                                         KubeClientOptions clientOptions);
KubeClientOptions webhookClientOptions(Duration requestTimeout, int maxRetries = 5);

}  // namespace gvirtus::webhook
