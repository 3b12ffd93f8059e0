#include "backend-shim/run.h"

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend-shim/backend/config.h"
#include "backend-shim/backend/hidden_path.h"
#include "backend-shim/backend/listen_probe.h"
#include "backend-shim/backend/output.h"
#include "backend-shim/backend/supervisor.h"
#include "backend-shim/load/metrics.h"
#include "backend-shim/load/nvml_gpus.h"
#include "backend-shim/load/publisher.h"
#include "backend-shim/options.h"
#include "backend-shim/peer_check.h"
#include "backend-shim/served_backend.h"
#include "common/health/server.h"
#include "common/kube/client.h"
#include "common/kube/connect.h"
#include "common/process/signals.h"
#include "common/telemetry/log.h"
#include "common/telemetry/metrics.h"
#include "common/time/stoppable_sleep.h"

namespace gvirtus::backend_shim {
namespace {

constexpr auto kMonitorInterval = std::chrono::seconds(1);

// Before anything starts, what would make the backend fail to listen and be restarted
// forever, said once: the port taken, properties.json not written. The exit code then.
std::optional<int> prepareBackend(const Options& options) {
  const ListenProbe probe;
  auto portState = probe.probe(options.port);
  if (!portState) {
    log::error("cannot read the socket tables", {{"error", portState.error().message}});
    return kExitFatal;
  }
  if (portState->listening) {
    return configurationError(kProgram, "--port: " + std::to_string(options.port) +
                                            " is already in use (a socket listens on it)");
  }
  if (auto written =
          writeBackendConfig(options.configOut, renderBackendConfig(options.port, options.plugins));
      !written) {
    return configurationError(kProgram, "--config-out: " + written.error().message);
  }
  return std::nullopt;
}

// This pod's client (--kubeconfig, else the in-cluster account) and the publisher of its
// gvirtus.io/load through it; both null without POD_NAME and POD_NAMESPACE.
struct PodReport {
  std::unique_ptr<KubeClient> client;
  std::unique_ptr<LoadPublisher> publisher;
};

Result<PodReport> makePodReport(const Options& options, std::stop_token cancel) {
  PodReport out;
  if (options.podName.empty() || options.podNamespace.empty()) {
    // Only with --peer-check=false: validateOptions wants the pod for the check.
    log::info("POD_NAME or POD_NAMESPACE is not set; the load annotation is not published");
    return out;
  }
  KubeClientOptions clientOptions;
  clientOptions.requestTimeout = std::chrono::seconds(10);
  clientOptions.maxRetries = 2;  // the publisher retries on its own schedule
  clientOptions.cancel = std::move(cancel);
  auto client = connectKubeClient(kProgram, options.common.kubeconfig, clientOptions);
  if (!client) {
    return fail(client.error());
  }
  out.client = std::move(*client);
  KubeClient* pods = out.client.get();
  out.publisher = std::make_unique<LoadPublisher>(
      [pods, &options](const std::string& body) -> Result<void> {
        auto patched = pods->patch(resources::kPods, options.podNamespace, options.podName,
                                   PatchType::Merge, body);
        if (!patched) {
          return fail(
              patched.error().context("patch pod " + options.podNamespace + "/" + options.podName));
        }
        return {};
      },
      options.publishInterval);
  return out;
}

// Before the backend starts: its first accept already asks the gate. Null when off.
Result<std::unique_ptr<PeerCheck>> startPeerCheck(const Options& options, KubeClient* client,
                                                  ShimMetrics& metrics) {
  if (!options.peerCheck) {
    log::warn(
        "peer check off (--peer-check=false): any address that reaches the port opens a "
        "session");
    return std::unique_ptr<PeerCheck>();
  }
  return PeerCheck::start(options, *client, metrics);
}

// The guard library goes into the backend with the peer check or without it: it also
// line-buffers the backend's stdout and makes GVirtuS's SO_REUSEADDR work, so that a
// restarted backend binds at once (peer_guard/). Without --peer-check it only passes
// accept on, and nothing is added to a round trip.
bool guardPreloaded(const Options& options, const PeerCheck* peerCheck) {
  if (peerCheck != nullptr) {
    return true;
  }
  auto usable = checkPeerGuardLibrary(options.peerGuardLibrary);
  if (!usable) {
    log::warn(
        "the backend runs without libgvirtus-peer-guard.so: its stdout may reach the log late, "
        "and a restarted backend waits for its port's old connections to end",
        {{"error", usable.error().message}});
  }
  return usable.has_value();
}

// Every second: the backend's state and the GPUs into the metrics and the load.
void monitor(std::stop_token stop, const ServedBackend& backend, const NvmlGpus& nvml,
             ShimMetrics& metrics, LoadPublisher* publisher, const std::atomic<bool>& draining,
             int maxSessions) {
  std::vector<GpuInfo> gpus;
  bool gpuErrorLogged = false;
  do {
    const SupervisorStatus status = backend.status();
    if (auto read = nvml.read()) {
      gpus = std::move(*read);
      gpuErrorLogged = false;
    } else if (!gpuErrorLogged) {
      log::warn("cannot read the GPUs; keeping the last numbers",
                {{"error", read.error().message}});
      gpuErrorLogged = true;
    }
    metrics.observeBackend(
        status, status.running && status.listening && !draining && !backend.restartingForLeaks());
    metrics.observeGpus(gpus);
    if (publisher != nullptr) {
      publisher->update(Load{status.connections, maxSessions, gpus});
    }
  } while (sleepUnlessStopped(stop, kMonitorInterval));
}

// SIGTERM: not ready, no new session, then the open ones may end within --drain-timeout
// before the backend is stopped.
void drain(const Options& options, ServedBackend& backend, PeerCheck* peerCheck) {
  if (peerCheck != nullptr) {
    // Not ready is not enough: a frontend restarted now still reaches the listening port.
    peerCheck->refuseNewSessions();
  }
  backend.refuseNewSessions();
  log::info("not ready; waiting for the backend's connections to close",
            {{"connections", backend.status().connections},
             {"timeout", formatDuration(options.drainTimeout)}});
  if (backend.waitForDrain(options.drainTimeout)) {
    log::info("no connection left");
  } else {
    log::warn("drain timeout reached; stopping the backend with connections open",
              {{"connections", backend.status().connections}});
  }
  backend.stop();
}

void logStarting(const Options& options, int healthPort) {
  log::info("starting", {{"version", GVIRTUS_VERSION},
                         {"port", options.port},
                         {"sessions", options.sessions},
                         {"config", options.configOut},
                         {"backend", options.backendCommand[0]},
                         {"healthPort", healthPort}});
}

}  // namespace

int run(const Options& options) {
  // First, before any thread starts: every thread inherits the blocked signals.
  ShutdownSignal& shutdown = ShutdownSignal::install();
  if (auto stopNow = prepareBackend(options)) {
    return *stopNow;
  }
  auto report = makePodReport(options, shutdown.deadline(kShutdownClientGrace));
  if (!report) {
    return configurationError(kProgram, report.error().message);
  }

  MetricsRegistry registry;
  registry.registerProcessMetrics();
  ShimMetrics metrics(registry, options.maxSessions);
  auto health = HealthServer::create(options.common.healthAddr, registry);
  if (!health) {
    return configurationError(kProgram, "--health-addr: " + health.error().message);
  }
  std::atomic<bool> draining{false};

  auto peerCheck = startPeerCheck(options, report->client.get(), metrics);
  if (!peerCheck) {
    log::error("cannot start the peer check", {{"error", peerCheck.error().message}});
    return kExitFatal;
  }
  const bool preloaded = guardPreloaded(options, peerCheck->get());
  // Before the backend starts, after it stops (declared before it): every line it writes
  // goes through here.
  auto backendOutput = BackendOutput::start();
  if (!backendOutput) {
    log::error("cannot read the backend's output", {{"error", backendOutput.error().message}});
    return kExitFatal;
  }
  if (auto reaper = becomeChildSubreaper(); !reaper) {
    log::warn("orphans of the backend will not be reaped here",
              {{"error", reaper.error().message}});
  }
  // The backend parses tenants' bytes: the guard keeps it from this pod's token.
  std::vector<std::string> env = withHiddenPath(
      backendEnvironment(currentEnvironment(), options.gvirtusHome), options.hideFromBackend);
  logPathFence(options.hideFromBackend, preloaded || options.sessions == kPerPodSessions);
  auto backend =
      ServedBackend::make({options, std::move(env), preloaded, peerCheck->get(),
                           report->client.get(), metrics, (*backendOutput)->childOutput()});
  if (!backend) {
    log::error("cannot start the backend", {{"error", backend.error().message}});
    return kExitFatal;
  }

  (*health)->setReadinessCheck([&draining, &backend]() -> Result<void> {
    if (draining) {
      return fail("shutting down: draining the backend's connections");
    }
    return (*backend)->ready();
  });
  if (auto started = (*health)->start(); !started) {
    return configurationError(kProgram, "--health-addr: " + started.error().message);
  }
  logStarting(options, (*health)->port());
  const auto nvml = NvmlGpus::open(options.nvmlLibrary);
  (*backend)->start();
  LoadPublisher* publisher = report->publisher.get();
  std::jthread monitorThread(monitor, std::cref(**backend), std::cref(*nvml), std::ref(metrics),
                             publisher, std::cref(draining), options.maxSessions);
  std::jthread publisherThread;
  if (publisher != nullptr) {
    publisherThread = std::jthread([publisher](std::stop_token stop) { publisher->run(stop); });
  }

  shutdown.wait();
  draining = true;
  drain(options, **backend, peerCheck->get());
  monitorThread.request_stop();
  publisherThread.request_stop();
  monitorThread = {};
  publisherThread = {};
  (*health)->stop();
  log::info("stopped");
  return kExitOk;
}

}  // namespace gvirtus::backend_shim
