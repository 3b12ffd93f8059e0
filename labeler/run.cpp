#include "labeler/run.h"

#include <exception>
#include <thread>

#include "common/health_server.h"
#include "common/kube_client.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/resource_cache.h"
#include "common/signals.h"
#include "labeler/node_labeler.h"
#include "labeler/options.h"

namespace gvirtus::labeler {
namespace {

int runLabeler(const Options& options) {
  // First, before any thread starts: every thread inherits the blocked signals.
  auto& shutdown = ShutdownSignal::install();
  auto config = loadKubeConfig(options.common.kubeconfig);
  if (!config) {
    return configurationError(kProgram, config.error().message);
  }
  KubeClientOptions clientOptions;
  clientOptions.userAgent = std::string(kProgram) + "/" + GVIRTUS_VERSION;
  clientOptions.qps = static_cast<double>(options.kubeApiQps);
  clientOptions.burst = static_cast<int>(options.kubeApiBurst);
  clientOptions.cancel = shutdown.deadline(kShutdownClientGrace);
  auto client = KubeClient::create(*config, clientOptions);
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
    if (!labeler.ready())
      return fail("node not reconciled yet");
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

}  // namespace

int run(int argc, const char* const* argv) {
  auto parsed = parseOptions(argc, argv);
  if (!parsed) {
    return parsed.error();
  }
  return runLabeler(*parsed);
}

}  // namespace gvirtus::labeler
