#include "backend-shim/run.h"

#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "backend-shim/backend/config.h"
#include "backend-shim/backend/hidden_path.h"
#include "backend-shim/backend/listen_probe.h"
#include "backend-shim/backend/output.h"
#include "backend-shim/backend/supervisor.h"
#include "backend-shim/leak_restart/gate.h"
#include "backend-shim/load/metrics.h"
#include "backend-shim/load/nvml_gpus.h"
#include "backend-shim/load/publisher.h"
#include "backend-shim/options.h"
#include "backend-shim/peer_check.h"
#include "backend-shim/sessions/host.h"
#include "common/http/health_server.h"
#include "common/kube/client.h"
#include "common/kube/connect.h"
#include "common/process/signals.h"
#include "common/telemetry/log.h"
#include "common/telemetry/metrics.h"
#include "common/time/stoppable_sleep.h"

namespace gvirtus::backend_shim {
namespace {

// The leak-restart gate as the shim runs it: the pods of --backend-selector in this pod's
// namespace, read through `client` (which must outlive it), --leak-restart-max-defer; each
// deferral also goes to `onDeferred`. Not started.
std::unique_ptr<LeakRestartGate> makeLeakRestartGate(const Options& options, KubeClient& client,
                                                     std::function<void()> onDeferred) {
  LeakRestartGateOptions gate;
  gate.self = options.podName;
  gate.maxDefer = options.leakRestartMaxDefer;
  gate.onDeferred = std::move(onDeferred);
  gate.listBackends = backendPodLister(client, options.podNamespace, options.backendSelector);
  return std::make_unique<LeakRestartGate>(std::move(gate));
}

constexpr auto kMonitorInterval = std::chrono::seconds(1);

// The client the load publisher writes with: --kubeconfig, else the in-cluster account.
Result<std::unique_ptr<KubeClient>> makeClient(const Options& options, std::stop_token cancel) {
  KubeClientOptions clientOptions;
  clientOptions.requestTimeout = std::chrono::seconds(10);
  clientOptions.maxRetries = 2;  // the publisher retries on its own schedule
  clientOptions.cancel = std::move(cancel);
  return connectKubeClient(kProgram, options.common.kubeconfig, clientOptions);
}

// Every second: the backend's state and the GPUs into the metrics and the load.
void monitor(std::stop_token stop, const std::function<SupervisorStatus()>& backendStatus,
             const NvmlGpus& nvml, ShimMetrics& metrics, LoadPublisher* publisher,
             const std::atomic<bool>& draining, const LeakRestartGate* leakGate, int maxSessions) {
  std::vector<GpuInfo> gpus;
  bool gpuErrorLogged = false;
  do {
    const SupervisorStatus status = backendStatus();
    if (auto read = nvml.read()) {
      gpus = std::move(*read);
      gpuErrorLogged = false;
    } else if (!gpuErrorLogged) {
      log::warn("cannot read the GPUs; keeping the last numbers",
                {{"error", read.error().message}});
      gpuErrorLogged = true;
    }
    const bool leakDraining = leakGate != nullptr && leakGate->draining();
    metrics.observeBackend(status,
                           status.running && status.listening && !draining && !leakDraining);
    metrics.observeGpus(gpus);
    if (publisher != nullptr) {
      publisher->update(Load{status.connections, maxSessions, gpus});
    }
  } while (sleepUnlessStopped(stop, kMonitorInterval));
}

// How the one shared backend process is supervised (--sessions=shared).
SupervisorOptions sharedSupervision(const Options& options, const std::vector<std::string>& env,
                                    bool preloaded, const PeerCheck* peerCheck,
                                    LeakRestartGate* leakGate, ProcessOutput output) {
  SupervisorOptions supervision;
  supervision.argv = backendArgv(options.backendCommand, options.configOut);
  supervision.env = env;
  if (peerCheck != nullptr) {
    supervision.env = peerCheck->backendEnvironment(supervision.env);
  } else if (preloaded) {
    supervision.env = withPreload(supervision.env, options.peerGuardLibrary);
  }
  supervision.reuseAddress = preloaded;
  supervision.output = output;
  supervision.port = options.port;
  supervision.reapScope = ReapScope::AnyChild;
  supervision.startupTimeout = options.startupTimeout;
  supervision.stopTimeout = options.stopTimeout;
  supervision.maxLeakedSockets = options.maxLeakedSockets;
  if (leakGate != nullptr) {
    supervision.leakRestartPermit = [leakGate](bool overLimit, bool idle) {
      return leakGate->permit(overLimit, idle);
    };
  }
  return supervision;
}

// The per-pod host as the monitor and the metrics see a backend: running while a process
// waits at its accept, its connections the pods it serves (what maxSessions counts).
SupervisorStatus asBackendStatus(const SessionHostStatus& host) {
  SupervisorStatus status;
  status.running = host.ready;
  status.listening = host.listening;
  status.connections = host.pods;
  status.starts = host.processStarts;
  status.restarts = host.processesLost;
  return status;
}

std::unique_ptr<SessionHost> startSessionHost(const Options& options, std::vector<std::string> env,
                                              ProcessOutput output, const PeerCheck* peerCheck,
                                              ShimMetrics& metrics) {
  SessionHostOptions host;
  host.port = options.port;
  host.argv = backendArgv(options.backendCommand, options.configOut);
  host.env = withPreload(env, options.peerGuardLibrary);
  host.output = output;
  host.pool = options.sessionPool;
  host.maxSessions = options.maxSessions;
  host.maxConnectionsPerPod = options.maxConnectionsPerPod;
  if (peerCheck != nullptr) {
    host.gateSocket = peerCheck->gate().socketPath();
    host.gateTimeout = options.peerWait + std::chrono::seconds(2);
    host.gpuMemoryShare = [peerCheck](Ipv4 pod) { return peerCheck->gpuMemoryShare(pod); };
  }
  host.startupTimeout = options.startupTimeout;
  host.onRefused = [&metrics](const char* kind) { metrics.observeRefusal(kind); };
  auto started = SessionHost::start(std::move(host));
  if (!started) {
    log::error("cannot serve sessions", {{"error", started.error().message}});
    return nullptr;
  }
  return std::move(*started);
}

}  // namespace

int run(const Options& options) {
  // First, before any thread starts: every thread inherits the blocked signals.
  ShutdownSignal& shutdown = ShutdownSignal::install();

  // The backend would fail to listen and be restarted forever: say so once, now.
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

  std::unique_ptr<KubeClient> client;
  std::unique_ptr<LoadPublisher> publisher;
  if (options.podName.empty() || options.podNamespace.empty()) {
    // Only with --peer-check=false: validateOptions wants the pod for the check.
    log::info("POD_NAME or POD_NAMESPACE is not set; the load annotation is not published");
  } else {
    auto made = makeClient(options, shutdown.deadline(kShutdownClientGrace));
    if (!made) {
      return configurationError(kProgram, made.error().message);
    }
    client = std::move(*made);
    publisher = std::make_unique<LoadPublisher>(
        [&client, &options](const std::string& body) -> Result<void> {
          auto patched = client->patch(resources::kPods, options.podNamespace, options.podName,
                                       PatchType::Merge, body);
          if (!patched) {
            return fail(patched.error().context("patch pod " + options.podNamespace + "/" +
                                                options.podName));
          }
          return {};
        },
        options.publishInterval);
  }

  MetricsRegistry registry;
  registry.registerProcessMetrics();
  ShimMetrics metrics(registry, options.maxSessions);
  auto health = HealthServer::create(options.common.healthAddr, registry);
  if (!health) {
    return configurationError(kProgram, "--health-addr: " + health.error().message);
  }
  std::atomic<bool> draining{false};

  // Before the backend starts: its first accept already asks the gate.
  std::unique_ptr<PeerCheck> peerCheck;
  if (options.peerCheck) {
    auto started = PeerCheck::start(options, *client, metrics);
    if (!started) {
      log::error("cannot start the peer check", {{"error", started.error().message}});
      return kExitFatal;
    }
    peerCheck = std::move(*started);
  } else {
    log::warn(
        "peer check off (--peer-check=false): any address that reaches the port opens a "
        "session");
  }

  // The guard library goes into the backend with the peer check or without it: it also
  // line-buffers the backend's stdout and makes GVirtuS's SO_REUSEADDR work, so that a
  // restarted backend binds at once (peer_guard/). Without --peer-check it only passes
  // accept on, and nothing is added to a round trip.
  bool preloaded = peerCheck != nullptr;
  if (!preloaded) {
    if (auto usable = checkPeerGuardLibrary(options.peerGuardLibrary); usable) {
      preloaded = true;
    } else {
      log::warn(
          "the backend runs without libgvirtus-peer-guard.so: its stdout may reach the log late, "
          "and a restarted backend waits for its port's old connections to end",
          {{"error", usable.error().message}});
    }
  }
  // Before the backend starts, after it stops (declared before the supervisor): every line
  // it writes goes through here.
  auto backendOutput = BackendOutput::start();
  if (!backendOutput) {
    log::error("cannot read the backend's output", {{"error", backendOutput.error().message}});
    return kExitFatal;
  }

  if (auto reaper = becomeChildSubreaper(); !reaper) {
    log::warn("orphans of the backend will not be reaped here",
              {{"error", reaper.error().message}});
  }
  const bool perPod = options.sessions == kPerPodSessions;
  // The backend parses tenants' bytes: the guard keeps it from this pod's token.
  const std::vector<std::string> env = withHiddenPath(
      backendEnvironment(currentEnvironment(), options.gvirtusHome), options.hideFromBackend);
  logPathFence(options.hideFromBackend, preloaded || perPod);

  // Declared before the supervisor, which asks it.
  std::unique_ptr<LeakRestartGate> leakGate;
  std::unique_ptr<Supervisor> supervisor;
  std::unique_ptr<SessionHost> sessionHost;
  if (perPod) {
    // Each process ends with its pod's last session, and with it the sockets GVirtuS leaks:
    // no leak restart is needed.
    sessionHost =
        startSessionHost(options, env, (*backendOutput)->childOutput(), peerCheck.get(), metrics);
    if (!sessionHost) {
      return kExitFatal;
    }
  } else {
    if (client && options.maxLeakedSockets > 0 && options.leakRestartMaxDefer.count() > 0) {
      leakGate = makeLeakRestartGate(options, *client,
                                     [&metrics] { metrics.observeLeakRestartDeferred(); });
    } else if (options.maxLeakedSockets > 0 && options.leakRestartMaxDefer.count() > 0) {
      log::info("a leak restart does not wait for another backend to be ready: no pod to read");
    }
    supervisor = std::make_unique<Supervisor>(sharedSupervision(
        options, env, preloaded, peerCheck.get(), leakGate.get(), (*backendOutput)->childOutput()));
  }
  const std::function<SupervisorStatus()> backendStatus = [&]() {
    return perPod ? asBackendStatus(sessionHost->status()) : supervisor->status();
  };

  (*health)->setReadinessCheck([&]() -> Result<void> {
    if (draining) {
      return fail("shutting down: draining the backend's connections");
    }
    if (perPod) {
      if (!sessionHost->status().ready) {
        return fail("no backend process has reached its accept yet");
      }
      return {};
    }
    if (leakGate && leakGate->draining()) {
      return fail(
          "restarting the backend to free leaked sockets once another backend is seen Ready");
    }
    const SupervisorStatus status = supervisor->status();
    if (status.portWaiting) {
      return fail("waiting for the backend's port " + std::to_string(options.port) +
                  " to be free before starting it" +
                  (status.portHeldBy.empty() ? "" : " (" + status.portHeldBy + ")"));
    }
    if (!status.running) {
      return fail("the backend is not running");
    }
    if (!status.listening) {
      return fail("the backend's port " + std::to_string(options.port) + " is not listening");
    }
    return {};
  });
  if (auto started = (*health)->start(); !started) {
    return configurationError(kProgram, "--health-addr: " + started.error().message);
  }

  log::info("starting", {{"version", GVIRTUS_VERSION},
                         {"port", options.port},
                         {"sessions", options.sessions},
                         {"config", options.configOut},
                         {"backend", options.backendCommand[0]},
                         {"healthPort", (*health)->port()}});
  const auto nvml = NvmlGpus::open(options.nvmlLibrary);
  if (supervisor) {
    supervisor->start();
  }
  if (leakGate) {
    leakGate->start();
  }
  std::jthread monitorThread(monitor, std::cref(backendStatus), std::cref(*nvml), std::ref(metrics),
                             publisher.get(), std::cref(draining), leakGate.get(),
                             options.maxSessions);
  std::jthread publisherThread;
  if (publisher) {
    publisherThread = std::jthread([&publisher](std::stop_token stop) { publisher->run(stop); });
  }

  shutdown.wait();
  draining = true;
  if (peerCheck) {
    // Not ready is not enough: a frontend restarted now still reaches the listening port.
    peerCheck->refuseNewSessions();
  }
  if (sessionHost) {
    sessionHost->refuseNewSessions();
  } else {
    supervisor->holdRestarts();
  }
  log::info("not ready; waiting for the backend's connections to close",
            {{"connections", backendStatus().connections},
             {"timeout", formatDuration(options.drainTimeout)}});
  const bool drained = sessionHost ? sessionHost->waitForDrain(options.drainTimeout)
                                   : supervisor->waitForDrain(options.drainTimeout);
  if (drained) {
    log::info("no connection left");
  } else {
    log::warn("drain timeout reached; stopping the backend with connections open",
              {{"connections", backendStatus().connections}});
  }
  if (sessionHost) {
    sessionHost->stop();
  } else {
    supervisor->stop();
  }
  if (leakGate) {
    leakGate->stop();
  }
  monitorThread.request_stop();
  publisherThread.request_stop();
  monitorThread = {};
  publisherThread = {};
  (*health)->stop();
  log::info("stopped");
  return kExitOk;
}

}  // namespace gvirtus::backend_shim
