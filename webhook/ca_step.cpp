#include "webhook/ca_step.h"

#include "common/health/server.h"
#include "common/process/signals.h"
#include "common/telemetry/log.h"
#include "common/telemetry/metrics.h"
#include "webhook/leader.h"
#include "webhook/tls/bootstrap.h"

namespace gvirtus::webhook {

TlsBootstrapOptions tlsBootstrapOptions(const Options& options) {
  TlsBootstrapOptions out;
  out.role = options.caRole;
  out.ns = options.ns;
  out.secretName = options.tlsSecretName;
  out.serviceName = options.serviceName;
  out.extraSans = options.tlsExtraSans;
  out.webhookConfigName = options.webhookConfigName;
  return out;
}

int runCaStep(const Options& options) {
  ShutdownSignal& shutdown = ShutdownSignal::install();
  KubeClientOptions clientOptions = webhookClientOptions(std::chrono::seconds(10));
  options.kubeApi.applyTo(clientOptions);
  auto client = connectWebhookClient(options, std::move(clientOptions));
  if (!client) {
    return configurationError(kProgram, client.error().message);
  }
  TlsBootstrap tls(**client, tlsBootstrapOptions(options), nullptr);

  MetricsRegistry registry;
  registry.registerProcessMetrics();
  auto health = HealthServer::create(options.common.healthAddr, registry);
  if (!health) {
    return configurationError(kProgram, "--health-addr: " + health.error().message);
  }
  (*health)->setReadinessCheck([&tls]() -> Result<void> {
    if (!tls.ready()) {
      return fail("TLS: " + tls.notReadyReason());
    }
    return {};
  });
  if (auto started = (*health)->start(); !started) {
    return configurationError(kProgram, "--health-addr: " + started.error().message);
  }
  tls.start();
  log::info("gvirtus-webhook started as the CA step",
            {{"caRole", caRoleName(options.caRole)},
             {"secret", options.ns + "/" + options.tlsSecretName},
             {"mutatingWebhookConfiguration", options.webhookConfigName}});

  shutdown.wait();
  tls.stop();
  (*health)->stop();
  return kExitOk;
}

}  // namespace gvirtus::webhook
