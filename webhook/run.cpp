#include "webhook/run.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "common/cache/resource_cache.h"
#include "common/controller/event_recorder.h"
#include "common/controller/leader_election.h"
#include "common/http/health_server.h"
#include "common/http/server.h"
#include "common/kube/client.h"
#include "common/kube/connect.h"
#include "common/net/ipv4_resolver.h"
#include "common/process/flags.h"
#include "common/process/signals.h"
#include "common/telemetry/log.h"
#include "common/telemetry/metrics.h"
#include "webhook/admission/mutate_handler.h"
#include "webhook/autoscale/controller.h"
#include "webhook/base/metrics.h"
#include "webhook/base/names.h"
#include "webhook/dra/device_taint_rule.h"
#include "webhook/dra/slice.h"
#include "webhook/dra/slice_publisher.h"
#include "webhook/follower/follower.h"
#include "webhook/options.h"
#include "webhook/peers/claim_peers.h"
#include "webhook/peers/publisher.h"
#include "webhook/placement/chooser.h"
#include "webhook/placement/cluster_source.h"
#include "webhook/placement/static_source.h"
#include "webhook/release/controller.h"
#include "webhook/tls/bootstrap.h"

namespace gvirtus::webhook {
namespace {

// The Lease of --leader-elect, in the webhook's namespace (manifests/webhook/rbac.yaml).
constexpr const char* kLeaseName = "gvirtus-webhook";

KubeClientOptions clientOptions(Duration requestTimeout, int maxRetries = 5) {
  KubeClientOptions out;
  out.requestTimeout = requestTimeout;
  out.maxRetries = maxRetries;
  out.cancel = ShutdownSignal::install().deadline(kShutdownClientGrace);
  return out;
}

// This replica in the Lease and in its Events: $POD_NAME, else host name and process id.
std::string identity() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) {
    std::snprintf(host, sizeof host, "unknown-host");
  }
  return envOr("POD_NAME", std::string(host) + "_" + std::to_string(getpid()));
}

// The leader's controllers (everyone's without --leader-elect). The waiting-pod controller
// always; the others where they were made (null: not).
struct LeaderWork {
  WaitingPodController* waiting = nullptr;
  AutoscaleController* autoscaler = nullptr;
  PeerPublisher* peers = nullptr;
  BackendFollower* follower = nullptr;
  SlicePublisher* slices = nullptr;
};

// Runs the leader's controllers until `stop`, each on its own thread but the waiting-pod
// controller.
void runControllers(std::stop_token stop, const LeaderWork& work) {
  std::vector<std::jthread> others;
  if (work.autoscaler != nullptr) {
    others.emplace_back([&work](std::stop_token own) { work.autoscaler->run(own); });
  }
  if (work.peers != nullptr) {
    others.emplace_back([&work](std::stop_token own) { work.peers->run(own); });
  }
  if (work.follower != nullptr) {
    others.emplace_back([&work](std::stop_token own) { work.follower->run(own); });
  }
  if (work.slices != nullptr) {
    others.emplace_back([&work](std::stop_token own) { work.slices->run(own); });
  }
  std::stop_callback endOthers(stop, [&others] {
    for (auto& thread : others) {
      thread.request_stop();
    }
  });
  work.waiting->run(stop);
}

}  // namespace

int run(const Options& options) {
  // glibc gives each of the server's worker threads an arena of its own and keeps what a
  // large review freed in it: under a burst of crafted reviews that held 60 MiB after and
  // 137 MiB at the peak; two arenas hold 16 and 94 (tests/bench/hostile_review_bench).
  ::mallopt(M_ARENA_MAX, 2);
  // First, before any thread starts: every thread inherits the blocked signals.
  ShutdownSignal& shutdown = ShutdownSignal::install();

  std::unique_ptr<KubeClient> client;
  if (options.needsApiServer()) {
    KubeClientOptions mainOptions = clientOptions(std::chrono::seconds(10));
    options.kubeApi.applyTo(mainOptions);
    auto made = connectKubeClient(kProgram, options.common.kubeconfig, mainOptions);
    if (!made) {
      return configurationError(kProgram, made.error().message);
    }
    client = std::move(*made);
  } else {
    log::info("static backends and TLS files: running without the API server");
  }

  // Where backends come from.
  std::unique_ptr<Ipv4Resolver> resolver;
  std::unique_ptr<BackendSource> source;
  ClusterBackendSource* clusterSource = nullptr;  // the same, for cluster backends
  if (!options.staticBackends.empty()) {
    auto made = Ipv4Resolver::create();
    if (!made) {
      log::error("cannot set up the DNS resolver", {{"error", made.error().message}});
      return kExitFatal;
    }
    resolver = std::move(*made);
    source = std::make_unique<StaticBackendSource>(
        options.staticBackends,
        [&resolver](const std::string& host) { return resolver->resolve(host); });
  } else {
    auto cluster = std::make_unique<ClusterBackendSource>(
        *client, options.backendNamespace, options.backendSelector, options.backendPort,
        ChooserOptions{}.assignmentWindow);
    clusterSource = cluster.get();
    source = std::move(cluster);
  }

  MetricsRegistry registry;
  registry.registerProcessMetrics();
  // The HTTPS server is made below; the gauge reads it only at a scrape, once it exists.
  HttpServer* https = nullptr;
  WebhookMetrics metrics(
      registry, [&source] { return static_cast<double>(source->backends()->size()); },
      [&https] {
        const auto end = https != nullptr ? https->certificateNotAfter() : std::nullopt;
        return end ? std::chrono::duration<double>(end->time_since_epoch()).count() : 0.0;
      });
  if (clusterSource != nullptr) {
    registry.gaugeFunction(
        "gvirtus_webhook_cached_nodes", "Nodes in the webhook's cache",
        [clusterSource] { return static_cast<double>(clusterSource->cacheSizes().nodes); });
    registry.gaugeFunction(
        "gvirtus_webhook_cached_backend_pods", "Backend pods in the webhook's cache",
        [clusterSource] { return static_cast<double>(clusterSource->cacheSizes().backendPods); });
    registry.gaugeFunction(
        "gvirtus_webhook_cached_gvirtus_pods",
        "GVirtuS pods (every namespace) in the webhook's cache, as the fields it reads",
        [clusterSource] { return static_cast<double>(clusterSource->cacheSizes().gvirtusPods); });
  }
  ChooserOptions chooserOptions;
  chooserOptions.policy = options.policy;
  if (!options.staticBackends.empty()) {
    // No one watches the pods of static backends: nothing would confirm an assignment. They
    // have no load report, so no maxSessions that assignments could fill either.
    chooserOptions.unconfirmedLifetime = Duration::zero();
  }
  BackendChooser chooser(chooserOptions);
  MutateConfig config;
  config.wiring = {options.addGpuLimit, options.schedulerName, options.kaiQueue};
  config.claimTemplate = options.draClaimTemplate;
  config.extendedResource = options.draExtendedResource;
  config.plugins = options.plugins;
  config.maxRequestBytes = options.maxRequestBytes;
  MutateHandler handler(config, *source, chooser, &metrics);

  // The waiting-pod controller, wherever there is an API server; with --leader-elect only
  // on the replica holding the Lease. Events get their own client, so that a burst of them
  // never holds up a release behind the client's rate limit.
  const std::string self = identity();
  std::unique_ptr<KubeClient> eventsClient;
  std::unique_ptr<EventRecorder> events;
  std::unique_ptr<WaitingPodController> controller;
  // Candidate GPU nodes opted in and out as pods wait (with --autoscale-candidates).
  std::unique_ptr<AutoscaleController> autoscaler;
  // gvirtus.io/peers of backend pods (static backends are none), where the controller runs.
  std::unique_ptr<PeerPublisher> peers;
  // Pods whose backend pod went away are recreated or marked (static backends: none).
  std::unique_ptr<KubeClient> followerClient;
  std::unique_ptr<BackendFollower> follower;
  // With --dra: the ResourceSlices of the backends' GPUs, and the claims allocated from them
  // with the pods that use claims (their addresses are the backends' peers).
  std::unique_ptr<ResourceCache> sliceCache;
  std::unique_ptr<ResourceCache> claimCache;
  std::unique_ptr<ResourceCache> claimantCache;
  std::unique_ptr<SlicePublisher> slices;
  std::unique_ptr<KubeClient> electionClient;
  std::unique_ptr<LeaderElector> elector;
  LeaderWork leaderWork;
  if (client) {
    auto made = connectKubeClient(kProgram, options.common.kubeconfig,
                                  clientOptions(std::chrono::seconds(10)));
    if (!made) {
      return configurationError(kProgram, made.error().message);
    }
    eventsClient = std::move(*made);
    EventRecorderOptions eventOptions;
    eventOptions.component = kProgram;
    eventOptions.host = envOr("NODE_NAME", "");
    eventOptions.instance = self;
    events = std::make_unique<EventRecorder>(*eventsClient, eventOptions);
    WaitingPodControllerOptions controllerOptions;
    controllerOptions.ownNamespace = options.ns;
    controllerOptions.plugins = options.plugins;
    if (clusterSource != nullptr) {
      controllerOptions.gvirtusPods = &clusterSource->frontendPods();
      if (options.autoscale.enabled()) {  // never with static backends (options.cpp)
        autoscaler = std::make_unique<AutoscaleController>(*client, clusterSource->frontendPods(),
                                                           *events, &metrics, options.autoscale);
        controllerOptions.onDemand = [&autoscaler](std::vector<CapacityDemand> demand,
                                                   BackendSnapshot backends) {
          autoscaler->demandSeen(std::move(demand), std::move(backends));
        };
      }
    }
    controller = std::make_unique<WaitingPodController>(*client, *source, chooser, *events,
                                                        &metrics, controllerOptions);
    if (clusterSource != nullptr && options.dra) {
      sliceCache =
          std::make_unique<ResourceCache>(*client, kResourceSlices, "", "", sliceFieldSelector());
      slices = std::make_unique<SlicePublisher>(*source, *sliceCache, sliceApi(*client));
      // Every claim is watched, and only this driver's, compacted, are kept; of the pods
      // only those labelled gvirtus.io/dra=true, that use claims.
      ResourceCacheOptions claimOptions;
      claimOptions.keep = isGvirtusClaim;
      claimOptions.transform = compactClaim;
      // Without the claims (a ClusterRole older than --dra, an API server without
      // resource.k8s.io/v1) no claimant is a peer, and the GVirtuS pods' lists go on.
      claimOptions.absentMeansEmpty = true;
      claimCache =
          std::make_unique<ResourceCache>(*client, dra::kResourceClaims, "", "", "", claimOptions);
      ResourceCacheOptions claimantOptions;
      claimantOptions.keep = usesClaims;
      claimantOptions.transform = compactClaimant;
      claimantCache = std::make_unique<ResourceCache>(
          *client, resources::kPods, "", std::string(kDraLabel) + "=true", "", claimantOptions);
    }
    source->setOnChange([&controller, &slices] {
      controller->backendsChanged();
      if (slices) {
        slices->backendsChanged();
      }
    });
    if (clusterSource != nullptr) {
      peers = std::make_unique<PeerPublisher>(
          clusterSource->backendPods(), clusterSource->frontendPods(), peerWriter(*client),
          &metrics, PeerPublisherOptions{.port = clusterSource->port()},
          ClaimantCaches{claimCache.get(), claimantCache.get()});
      if (options.backendLostGrace > Duration::zero()) {
        // Its own client: a burst of deletes never holds up releases (of the pods their
        // owners create again, too) behind the client's rate limit.
        made = connectKubeClient(kProgram, options.common.kubeconfig,
                                 clientOptions(std::chrono::seconds(10)));
        if (!made) {
          return configurationError(kProgram, made.error().message);
        }
        followerClient = std::move(*made);
        BackendFollowerOptions followerOptions;
        followerOptions.backendNamespace = options.backendNamespace;
        followerOptions.grace = options.backendLostGrace;
        if (options.dra) {
          std::string whyNot;
          followerOptions.taintLostDevices = taintRulesUsable(*followerClient, whyNot);
          if (!whyNot.empty()) {
            log::info(
                "claimants of a lost backend are deleted or marked by the follower, "
                "not evicted for a device taint",
                {{"why", whyNot}});
          }
        }
        follower = std::make_unique<BackendFollower>(
            clusterSource->backendPods(), clusterSource->frontendPods(),
            followerApi(*followerClient), events.get(), &metrics, followerOptions,
            ClaimantCaches{claimCache.get(), claimantCache.get()});
      }
    }
    leaderWork = {controller.get(), autoscaler.get(), peers.get(), follower.get(), slices.get()};
    if (options.leaderElect) {
      // A renewal must end well within the renew deadline (see LeaderElector).
      made = connectKubeClient(kProgram, options.common.kubeconfig,
                               clientOptions(options.leaderElectRenewDeadline / 3, 0));
      if (!made) {
        return configurationError(kProgram, made.error().message);
      }
      electionClient = std::move(*made);
      LeaderElectionConfig election;
      election.ns = options.ns;
      election.name = kLeaseName;
      election.identity = self;
      election.leaseDuration = options.leaderElectLeaseDuration;
      election.renewDeadline = options.leaderElectRenewDeadline;
      election.retryPeriod = options.leaderElectRetryPeriod;
      // The two replicas break the chooser's ties in opposite orders (TieOrder).
      chooser.setTieOrder(TieOrder::Descending);
      election.onStartedLeading = [&leaderWork, &chooser](std::stop_token stop) {
        chooser.setTieOrder(TieOrder::Ascending);
        runControllers(stop, leaderWork);
        chooser.setTieOrder(TieOrder::Descending);
      };
      elector = std::make_unique<LeaderElector>(*electionClient, election);
    }
  }

  // The admission listener. Bodies up to twice the limit are read and answered 400 by the
  // handler with a message; beyond that the server refuses them unread (413).
  HttpServerOptions httpOptions;
  httpOptions.name = "webhook";
  httpOptions.address = options.listen;
  httpOptions.tls = true;
  httpOptions.certFile = options.tlsCertFile;
  httpOptions.keyFile = options.tlsKeyFile;
  httpOptions.maxBodyBytes = 2 * options.maxRequestBytes;
  httpOptions.readTimeout = std::chrono::seconds(10);
  auto server = HttpServer::create(httpOptions);
  if (!server) {
    return configurationError(
        kProgram,
        (options.tlsFromFiles() ? "--tls-cert-file: " : "--listen: ") + server.error().message);
  }
  https = server->get();
  (*server)->handle("POST", "/mutate",
                    [&handler](const HttpRequest& request) { return handler.handle(request); });

  std::unique_ptr<TlsBootstrap> tls;
  if (!options.tlsFromFiles()) {
    TlsBootstrapOptions tlsOptions;
    tlsOptions.ns = options.ns;
    tlsOptions.secretName = options.tlsSecretName;
    tlsOptions.serviceName = options.serviceName;
    tlsOptions.extraSans = options.tlsExtraSans;
    tlsOptions.webhookConfigName = options.webhookConfigName;
    tls = std::make_unique<TlsBootstrap>(*client, tlsOptions, [https](const PemKeyPair& pair) {
      return https->setCertificate(pair);
    });
  }

  auto health = HealthServer::create(options.common.healthAddr, registry);
  if (!health) {
    return configurationError(kProgram, "--health-addr: " + health.error().message);
  }
  (*health)->setReadinessCheck([&source, &tls]() -> Result<void> {
    if (!source->ready()) {
      return fail("the backend source has not synced yet");
    }
    if (tls && !tls->ready()) {
      return fail("TLS: " + tls->notReadyReason());
    }
    return {};
  });
  if (auto started = (*health)->start(); !started) {
    return configurationError(kProgram, "--health-addr: " + started.error().message);
  }

  source->start();
  // On every way out, the source stops before the controller it calls back goes away.
  const std::vector<ResourceCache*> draCaches = {sliceCache.get(), claimCache.get(),
                                                 claimantCache.get()};
  struct SourceStopper {
    BackendSource& source;
    const std::vector<ResourceCache*>& caches;
    ~SourceStopper() {
      source.stop();
      for (ResourceCache* cache : caches) {
        if (cache != nullptr) {
          cache->stop();
        }
      }
    }
  } stopSource{*source, draCaches};
  for (ResourceCache* cache : draCaches) {
    if (cache != nullptr) {
      cache->start();
    }
  }
  if (tls) {
    tls->start();
  }
  if (auto started = (*server)->start(); !started) {
    return configurationError(kProgram, "--listen: " + started.error().message);
  }
  std::jthread controllerThread;
  if (events) {
    events->start();
  }
  if (elector) {
    if (auto started = elector->start(); !started) {
      return configurationError(kProgram, "--leader-elect: " + started.error().message);
    }
  } else if (controller) {
    controllerThread =
        std::jthread([&leaderWork](std::stop_token stop) { runControllers(stop, leaderWork); });
  }
  std::string controllerMode = "off (no API server)";
  if (controller) {
    controllerMode = options.leaderElect ? "when leading (Lease " + options.ns + "/" + kLeaseName +
                                               ", identity " + self + ")"
                                         : "on";
  }
  log::info(
      "gvirtus-webhook started",
      {{"listen", options.listen},
       {"policy", policyName(options.policy)},
       {"backends", options.staticBackends.empty() ? "pods in " + options.backendNamespace + " (" +
                                                         options.backendSelector + ")"
                                                   : "static"},
       {"tls", options.tlsFromFiles() ? "files" : "own CA in Secret " + options.tlsSecretName},
       {"waitingPodController", controllerMode},
       {"peerPublisher", peers ? controllerMode : "off (static backends)"},
       {"draSlices", slices ? controllerMode + ", driver " + kDraDriver : "off"},
       {"backendFollower",
        follower ? controllerMode + ", grace " + formatDuration(options.backendLostGrace) : "off"},
       {"autoscale", options.autoscale.enabled()
                         ? options.autoscale.candidates + " (" +
                               std::to_string(options.autoscale.min) + ".." +
                               std::to_string(options.autoscale.max) + ")"
                         : "off"}});

  shutdown.wait();
  (*server)->stop();
  // Leadership is given up (the Lease released, so that another replica takes over at
  // once) only after the controller's work has ended.
  if (elector) {
    elector->stop();
  }
  if (controllerThread.joinable()) {
    controllerThread.request_stop();
    controllerThread.join();
  }
  if (events) {
    events->stop();
  }
  if (tls) {
    tls->stop();
  }
  source->stop();
  for (ResourceCache* cache : draCaches) {
    if (cache != nullptr) {
      cache->stop();
    }
  }
  (*health)->stop();
  return kExitOk;
}

}  // namespace gvirtus::webhook
