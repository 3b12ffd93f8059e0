#include "webhook/run.h"

#include <cstdio>
#include <memory>

#include "common/health_server.h"
#include "common/http_server.h"
#include "common/ipv4_resolver.h"
#include "common/kube_client.h"
#include "common/kube_config.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/signals.h"
#include "webhook/backend_chooser.h"
#include "webhook/cluster_backend_source.h"
#include "webhook/metrics.h"
#include "webhook/mutate_handler.h"
#include "webhook/options.h"
#include "webhook/static_backend_source.h"
#include "webhook/tls_bootstrap.h"

namespace gvirtus::webhook {
namespace {

int configurationError(const std::string& reason) {
  std::fprintf(stderr, "%s: %s\n", kProgram, reason.c_str());
  return kExitUsage;
}

Result<std::unique_ptr<KubeClient>> makeClient(const Options& options) {
  auto config = loadKubeConfig(options.common.kubeconfig);
  if (!config) {
    return fail(config.error().context(options.common.kubeconfig.empty()
                                           ? "in-cluster configuration (or set --kubeconfig)"
                                           : "--kubeconfig"));
  }
  KubeClientOptions clientOptions;
  clientOptions.userAgent = std::string(kProgram) + "/" + GVIRTUS_VERSION;
  clientOptions.requestTimeout = std::chrono::seconds(10);
  auto client = KubeClient::create(*config, clientOptions);
  if (!client) {
    return fail(client.error().context("Kubernetes client"));
  }
  return std::move(*client);
}

}  // namespace

int run(int argc, const char* const* argv) {
  ShutdownSignal& shutdown = ShutdownSignal::install();
  auto parsed = parseOptions(argc, argv);
  if (!parsed) {
    return parsed.error();
  }
  const Options& options = *parsed;

  std::unique_ptr<KubeClient> client;
  if (options.needsApiServer()) {
    auto made = makeClient(options);
    if (!made) {
      return configurationError(made.error().message);
    }
    client = std::move(*made);
  } else {
    log::info("static backends and TLS files: running without the API server");
  }

  // Where backends come from.
  std::unique_ptr<Ipv4Resolver> resolver;
  std::unique_ptr<BackendSource> source;
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
    source = std::make_unique<ClusterBackendSource>(*client, options.backendNamespace,
                                                    options.backendSelector,
                                                    static_cast<int>(options.backendPort));
  }

  MetricsRegistry registry;
  registry.registerProcessMetrics();
  WebhookMetrics metrics(registry,
                         [&source] { return static_cast<double>(source->backends().size()); });
  ChooserOptions chooserOptions;
  chooserOptions.policy = options.policy;
  BackendChooser chooser(chooserOptions);
  MutateConfig config;
  config.wiring = {options.addGpuLimit, options.schedulerName, options.kaiQueue};
  config.plugins = options.plugins;
  config.maxRequestBytes = static_cast<size_t>(options.maxRequestBytes);
  MutateHandler handler(config, *source, chooser, &metrics);

  // The admission listener. Bodies up to twice the limit are read and answered 400 by the
  // handler with a message; beyond that the server refuses them unread (413).
  HttpServerOptions httpOptions;
  httpOptions.name = "webhook";
  httpOptions.address = options.listen;
  httpOptions.tls = true;
  httpOptions.certFile = options.tlsCertFile;
  httpOptions.keyFile = options.tlsKeyFile;
  httpOptions.maxBodyBytes = 2 * static_cast<size_t>(options.maxRequestBytes);
  httpOptions.readTimeout = std::chrono::seconds(10);
  auto server = HttpServer::create(httpOptions);
  if (!server) {
    return configurationError((options.tlsFromFiles() ? "--tls-cert-file: " : "--listen: ") +
                              server.error().message);
  }
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
    HttpServer* https = server->get();
    tls = std::make_unique<TlsBootstrap>(*client, tlsOptions, [https](const PemKeyPair& pair) {
      return https->setCertificate(pair);
    });
  }

  auto health = HealthServer::create(options.common.healthAddr, registry);
  if (!health) {
    return configurationError("--health-addr: " + health.error().message);
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
    return configurationError("--health-addr: " + started.error().message);
  }

  source->start();
  if (tls) {
    tls->start();
  }
  if (auto started = (*server)->start(); !started) {
    return configurationError("--listen: " + started.error().message);
  }
  log::info(
      "gvirtus-webhook started",
      {{"listen", options.listen},
       {"policy", policyName(options.policy)},
       {"backends", options.staticBackends.empty() ? "pods in " + options.backendNamespace + " (" +
                                                         options.backendSelector + ")"
                                                   : "static"},
       {"tls", options.tlsFromFiles() ? "files" : "own CA in Secret " + options.tlsSecretName}});

  shutdown.wait();
  (*server)->stop();
  if (tls) {
    tls->stop();
  }
  source->stop();
  (*health)->stop();
  return kExitOk;
}

}  // namespace gvirtus::webhook
