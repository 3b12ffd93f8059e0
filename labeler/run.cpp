#include "labeler/run.h"

#include <exception>
#include <thread>

#include "common/cache/resource_cache.h"
#include "common/health/server.h"
#include "common/kube/connect.h"
#include "common/process/signals.h"
#include "common/telemetry/log.h"
#include "common/telemetry/metrics.h"
#include "labeler/node_labeler.h"
#include "labeler/options.h"

namespace gvirtus::labeler {

int run(const Options& options) {
  // First, before any thread starts: every thread inherits the blocked signals.
  auto& shutdown = ShutdownSignal::install();
  KubeClientOptions clientOptions;
  options.kubeApi.applyTo(clientOptions);
  clientOptions.cancel = shutdown.deadline(kShutdownClientGrace);
  auto client = connectKubeClient(kProgram, options.common.kubeconfig, clientOptions);
  if (!client) {
    return configurationError(kProgram, client.error().message);
  }
  MetricsRegistry metrics;
  metrics.registerProcessMetrics();
  NodeLabeler labeler(nodeApi(**client), options, metrics);

  if (options.once) {
    if (auto done = labeler.reconcileOnce(); !done) {
      log::error("reconcile failed", {{"node", options.nodeName}, {"error", done.error().message}});
      return kExitFatal;
    }
    return kExitOk;
  }

  auto health = HealthServer::create(options.common.healthAddr, metrics);
  if (!health) {
    return configurationError(kProgram, "--health-addr: " + health.error().message);
  }
  (*health)->setReadinessCheck([&labeler]() -> Result<void> {
    if (!labeler.ready()) {
      return fail("node not reconciled yet");
    }
    return {};
  });
  if (auto started = (*health)->start(); !started) {
    return configurationError(kProgram, "--health-addr: " + started.error().message);
  }
  log::info("labeler started", {{"node", options.nodeName}, {"allNodes", options.allNodes}});
  ResourceCache nodes(**client, resources::kNodes, "", "", nodeFieldSelector(options));
  std::jthread loop([&labeler, &nodes](std::stop_token stop) { labeler.run(stop, nodes); });
  shutdown.wait();
  log::info("shutting down", {{"signal", shutdown.signalNumber()}});
  loop.request_stop();
  loop.join();
  (*health)->stop();
  return kExitOk;
}

}  // namespace gvirtus::labeler
