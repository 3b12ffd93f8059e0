#include "webhook/run.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "common/health/server.h"
#include "common/http/server.h"
#include "common/net/ipv4_resolver.h"
#include "common/process/flags.h"
#include "common/process/signals.h"
#include "common/telemetry/log.h"
#include "common/telemetry/metrics.h"
#include "webhook/admission/mutate_handler.h"
#include "webhook/base/metrics.h"
#include "webhook/base/names.h"
#include "webhook/ca_step.h"
#include "webhook/dra/slice.h"
#include "webhook/leader.h"
#include "webhook/options.h"
#include "webhook/placement/chooser.h"
#include "webhook/placement/cluster_source.h"
#include "webhook/placement/static_source.h"
#include "webhook/tls/bootstrap.h"

namespace gvirtus::webhook {
namespace {

// This replica in the Lease and in its Events: $POD_NAME, else host name and process id.
std::string identity() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) {
    std::snprintf(host, sizeof host, "unknown-host");
  }
  return envOr("POD_NAME", std::string(host) + "_" + std::to_string(getpid()));
}

// The client of admission and of the controllers' reads and writes; null with static
// backends and TLS files, which need no API server.
Result<std::unique_ptr<KubeClient>> mainClient(const Options& options) {
  if (!options.needsApiServer()) {
    log::info("static backends and TLS files: running without the API server");
    return std::unique_ptr<KubeClient>();
  }
  KubeClientOptions clientOptions = webhookClientOptions(std::chrono::seconds(10));
  options.kubeApi.applyTo(clientOptions);
  return connectWebhookClient(options, std::move(clientOptions));
}

// Where backends come from: the hosts of --static-backends, or the backend pods of the
// cluster (then `cluster` is the same source).
struct Backends {
  std::unique_ptr<Ipv4Resolver> resolver;
  std::unique_ptr<BackendSource> source;
  ClusterBackendSource* cluster = nullptr;
};

Result<Backends> makeBackends(const Options& options, KubeClient* client) {
  Backends out;
  if (options.staticBackends.empty()) {
    auto cluster = std::make_unique<ClusterBackendSource>(
        *client, options.backendNamespace, options.backendSelector, options.backendPort,
        ChooserOptions{}.assignmentWindow);
    out.cluster = cluster.get();
    out.source = std::move(cluster);
    return out;
  }
  auto resolver = Ipv4Resolver::create();
  if (!resolver) {
    return fail(resolver.error().context("cannot set up the DNS resolver"));
  }
  out.resolver = std::move(*resolver);
  Ipv4Resolver* resolve = out.resolver.get();
  out.source = std::make_unique<StaticBackendSource>(
      options.staticBackends,
      [resolve](const std::string& host) { return resolve->resolve(host); });
  return out;
}

void addCacheGauges(MetricsRegistry& registry, const ClusterBackendSource& cluster) {
  registry.gaugeFunction("gvirtus_webhook_cached_nodes", "Nodes in the webhook's cache",
                         [&cluster] { return static_cast<double>(cluster.cacheSizes().nodes); });
  registry.gaugeFunction(
      "gvirtus_webhook_cached_backend_pods", "Backend pods in the webhook's cache",
      [&cluster] { return static_cast<double>(cluster.cacheSizes().backendPods); });
  registry.gaugeFunction(
      "gvirtus_webhook_cached_gvirtus_pods",
      "GVirtuS pods (every namespace) in the webhook's cache, as the fields it reads",
      [&cluster] { return static_cast<double>(cluster.cacheSizes().gvirtusPods); });
}

ChooserOptions chooserOptions(const Options& options) {
  ChooserOptions out;
  out.policy = options.policy;
  if (!options.staticBackends.empty()) {
    // No one watches the pods of static backends: nothing would confirm an assignment. They
    // have no load report, so no maxSessions that assignments could fill either.
    out.unconfirmedLifetime = Duration::zero();
  }
  return out;
}

MutateConfig mutateConfig(const Options& options) {
  MutateConfig config;
  config.wiring = {options.addGpuLimit, options.schedulerName, options.kaiQueue};
  config.claimTemplate = options.draClaimTemplate;
  config.extendedResource = options.draExtendedResource;
  config.plugins = options.plugins;
  config.maxRequestBytes = options.maxRequestBytes;
  return config;
}

// The admission listener. Bodies up to twice the limit are read and answered 400 by the
// handler with a message; beyond that the server refuses them unread (413).
Result<std::unique_ptr<HttpServer>> makeAdmissionServer(const Options& options,
                                                        MutateHandler& handler) {
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
    return fail(server.error().context(options.tlsFromFiles() ? "--tls-cert-file" : "--listen"));
  }
  (*server)->handle("POST", "/mutate",
                    [&handler](const HttpRequest& request) { return handler.handle(request); });
  return server;
}

// Our own CA and serving certificate, for clusters without cert-manager (null with files).
std::unique_ptr<TlsBootstrap> makeTlsBootstrap(const Options& options, KubeClient* client,
                                               HttpServer& https) {
  if (options.tlsFromFiles()) {
    return nullptr;
  }
  return std::make_unique<TlsBootstrap>(
      *client, tlsBootstrapOptions(options),
      [&https](const PemKeyPair& pair) { return https.setCertificate(pair); });
}

// /healthz, /readyz (the backends synced, the certificate ours) and /metrics, started.
Result<std::unique_ptr<HealthServer>> startHealth(const Options& options, MetricsRegistry& registry,
                                                  BackendSource& source, const TlsBootstrap* tls) {
  auto health = HealthServer::create(options.common.healthAddr, registry);
  if (!health) {
    return fail(health.error());
  }
  (*health)->setReadinessCheck([&source, tls]() -> Result<void> {
    if (!source.ready()) {
      return fail("the backend source has not synced yet");
    }
    if (tls != nullptr && !tls->ready()) {
      return fail("TLS: " + tls->notReadyReason());
    }
    return {};
  });
  if (auto started = (*health)->start(); !started) {
    return fail(started.error());
  }
  return health;
}

void logStarted(const Options& options, const Leader* leader) {
  const std::string mode = leader != nullptr ? leader->mode() : "off (no API server)";
  log::info(
      "gvirtus-webhook started",
      {{"listen", options.listen},
       {"policy", policyName(options.policy)},
       {"backends", options.staticBackends.empty() ? "pods in " + options.backendNamespace + " (" +
                                                         options.backendSelector + ")"
                                                   : "static"},
       {"tls", options.tlsFromFiles() ? "files"
                                      : "own CA in Secret " + options.tlsSecretName + " (" +
                                            caRoleName(options.caRole) + ")"},
       {"waitingPodController", mode},
       {"peerPublisher",
        leader != nullptr && leader->publishesPeers() ? mode : "off (static backends)"},
       {"draSlices",
        leader != nullptr && leader->publishesSlices() ? mode + ", driver " + kDraDriver : "off"},
       {"backendFollower", leader != nullptr && leader->followsBackends()
                               ? mode + ", grace " + formatDuration(options.backendLostGrace)
                               : "off"},
       {"autoscale", options.autoscale.enabled()
                         ? options.autoscale.candidates + " (" +
                               std::to_string(options.autoscale.min) + ".." +
                               std::to_string(options.autoscale.max) + ")"
                         : "off"}});
}

// On every way out of run(), the backend source and the leader's caches stop before the
// controllers they call back go away.
struct FeedsStopper {
  BackendSource& source;
  Leader* leader;
  ~FeedsStopper() {
    source.stop();
    if (leader != nullptr) {
      leader->stopFeeds();
    }
  }
};

// After SIGTERM: no new review, then the controllers' work ends (and the Lease is given up,
// so that another replica takes over at once), then what feeds them.
void stopInOrder(HttpServer& server, Leader* leader, TlsBootstrap* tls, BackendSource& source,
                 HealthServer& health) {
  server.stop();
  if (leader != nullptr) {
    leader->stop();
  }
  if (tls != nullptr) {
    tls->stop();
  }
  source.stop();
  if (leader != nullptr) {
    leader->stopFeeds();
  }
  health.stop();
}

int runWebhook(const Options& options) {
  // glibc gives each of the server's worker threads an arena of its own and keeps what a
  // large review freed in it: under a burst of crafted reviews that held 60 MiB after and
  // 137 MiB at the peak; two arenas hold 16 and 94 (tests/bench/hostile_review_bench).
  ::mallopt(M_ARENA_MAX, 2);
  // First, before any thread starts: every thread inherits the blocked signals.
  ShutdownSignal& shutdown = ShutdownSignal::install();

  auto client = mainClient(options);
  if (!client) {
    return configurationError(kProgram, client.error().message);
  }
  auto backends = makeBackends(options, client->get());
  if (!backends) {
    log::error("cannot start", {{"error", backends.error().message}});
    return kExitFatal;
  }
  BackendSource& source = *backends->source;

  MetricsRegistry registry;
  registry.registerProcessMetrics();
  // The HTTPS server is made below; the gauge reads it only at a scrape, once it exists.
  HttpServer* https = nullptr;
  WebhookMetrics metrics(
      registry, [&source] { return static_cast<double>(source.backends()->size()); },
      [&https] {
        const auto end = https != nullptr ? https->certificateNotAfter() : std::nullopt;
        return end ? std::chrono::duration<double>(end->time_since_epoch()).count() : 0.0;
      });
  if (backends->cluster != nullptr) {
    addCacheGauges(registry, *backends->cluster);
  }
  BackendChooser chooser(chooserOptions(options));
  MutateHandler handler(mutateConfig(options), source, chooser, &metrics);

  // The controllers, wherever there is an API server.
  std::unique_ptr<Leader> leader;
  if (*client) {
    auto built =
        Leader::build({options, **client, source, backends->cluster, chooser, metrics, identity()});
    if (!built) {
      return configurationError(kProgram, built.error().message);
    }
    leader = std::move(*built);
  }
  auto server = makeAdmissionServer(options, handler);
  if (!server) {
    return configurationError(kProgram, server.error().message);
  }
  https = server->get();
  std::unique_ptr<TlsBootstrap> tls = makeTlsBootstrap(options, client->get(), *https);
  auto health = startHealth(options, registry, source, tls.get());
  if (!health) {
    return configurationError(kProgram, "--health-addr: " + health.error().message);
  }

  source.start();
  FeedsStopper feedsStopper{source, leader.get()};
  if (leader) {
    leader->startFeeds();
  }
  if (tls) {
    tls->start();
  }
  if (auto started = (*server)->start(); !started) {
    return configurationError(kProgram, "--listen: " + started.error().message);
  }
  if (leader) {
    if (auto started = leader->start(); !started) {
      return configurationError(kProgram, "--leader-elect: " + started.error().message);
    }
  }
  logStarted(options, leader.get());

  shutdown.wait();
  stopInOrder(**server, leader.get(), tls.get(), source, **health);
  return kExitOk;
}

}  // namespace

int run(const Options& options) {
  // The CA step alone (--ca-role=issue) serves no admission.
  const bool caStep = !options.tlsFromFiles() && options.caRole == CaRole::Issue;
  return caStep ? runCaStep(options) : runWebhook(options);
}

}  // namespace gvirtus::webhook
