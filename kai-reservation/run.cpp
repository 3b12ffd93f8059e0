#include "kai-reservation/run.h"

#include <atomic>
#include <chrono>

#include "common/health/server.h"
#include "common/kube/connect.h"
#include "common/process/signals.h"
#include "common/telemetry/log.h"
#include "common/telemetry/metrics.h"
#include "common/time/backoff.h"
#include "common/time/stoppable_sleep.h"
#include "kai-reservation/options.h"
#include "kai-reservation/reservation.h"

namespace gvirtus::kai_reservation {

int run(const Options& options) {
  // First, before any thread starts: every thread inherits the blocked signals.
  auto& shutdown = ShutdownSignal::install();
  auto device = reservedDevice(options.vgpuIds);
  if (!device) {
    return configurationError(kProgram, device.error().message);
  }
  KubeClientOptions clientOptions;
  clientOptions.cancel = shutdown.deadline(std::chrono::seconds(1));
  auto client = connectKubeClient(kProgram, options.common.kubeconfig, clientOptions);
  if (!client) {
    return configurationError(kProgram, client.error().message);
  }
  MetricsRegistry metrics;
  metrics.registerProcessMetrics();
  auto health = HealthServer::create(options.common.healthAddr, metrics);
  if (!health) {
    return configurationError(kProgram, "--health-addr: " + health.error().message);
  }
  // Read by the health server's threads.
  std::atomic<bool> recorded = false;
  (*health)->setReadinessCheck([&recorded]() -> Result<void> {
    if (!recorded) {
      return fail("reservation not recorded yet");
    }
    return {};
  });
  if (auto started = (*health)->start(); !started) {
    return configurationError(kProgram, "--health-addr: " + started.error().message);
  }

  // The binder gives up on its own after its allocation timeout; until then an API error
  // (a restarting API server, a conflict with another writer) is worth another try.
  const auto deadline = std::chrono::steady_clock::now() + options.retryFor;
  Backoff backoff(std::chrono::milliseconds(200), std::chrono::seconds(5));
  std::string held;
  for (;;) {
    auto named = recordReservation(**client, options.podNamespace, options.podName, *device);
    if (named) {
      held = *named;
      break;
    }
    log::warn(
        "could not record the reservation",
        {{"pod", options.podNamespace + "/" + options.podName}, {"error", named.error().message}});
    if (std::chrono::steady_clock::now() >= deadline) {
      log::error("giving up", {{"after", formatDuration(options.retryFor)}});
      return kExitFatal;
    }
    if (!sleepUnlessStopped(shutdown.token(), backoff.next())) {
      return kExitOk;
    }
  }
  recorded = true;
  if (held != *device) {
    log::warn("the pod already names another device; keeping it",
              {{"named", held}, {"allocated", *device}});
  }
  log::info("holding the virtual GPU for KAI-Scheduler",
            {{"pod", options.podNamespace + "/" + options.podName}, {"device", held}});
  shutdown.wait();
  log::info("shutting down", {{"signal", shutdown.signalNumber()}});
  (*health)->stop();
  return kExitOk;
}

}  // namespace gvirtus::kai_reservation
