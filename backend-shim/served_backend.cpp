#include "backend-shim/served_backend.h"

#include <functional>
#include <utility>

#include "backend-shim/backend/config.h"
#include "common/telemetry/log.h"

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

// How the one shared backend process is supervised (--sessions=shared).
SupervisorOptions sharedSupervision(const ServedBackend::Inputs& inputs,
                                    LeakRestartGate* leakGate) {
  const Options& options = inputs.options;
  SupervisorOptions supervision;
  supervision.argv = backendArgv(options.backendCommand, options.configOut);
  supervision.env = inputs.env;
  if (inputs.peerCheck != nullptr) {
    supervision.env = inputs.peerCheck->backendEnvironment(supervision.env);
  } else if (inputs.preloaded) {
    supervision.env = withPreload(supervision.env, options.peerGuardLibrary);
  }
  supervision.reuseAddress = inputs.preloaded;
  supervision.output = inputs.output;
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

// One process per pod (--sessions=per-pod), the first started.
Result<std::unique_ptr<SessionHost>> startSessionHost(const ServedBackend::Inputs& inputs) {
  const Options& options = inputs.options;
  SessionHostOptions host;
  host.port = options.port;
  host.argv = backendArgv(options.backendCommand, options.configOut);
  host.env = withPreload(inputs.env, options.peerGuardLibrary);
  host.output = inputs.output;
  host.pool = options.sessionPool;
  host.maxSessions = options.maxSessions;
  host.maxConnectionsPerPod = options.maxConnectionsPerPod;
  if (const PeerCheck* peerCheck = inputs.peerCheck) {
    host.gateSocket = peerCheck->gate().socketPath();
    host.gateTimeout = options.peerWait + std::chrono::seconds(2);
    host.gpuMemoryShare = [peerCheck](Ipv4 pod) { return peerCheck->gpuMemoryShare(pod); };
  }
  host.startupTimeout = options.startupTimeout;
  ShimMetrics& metrics = inputs.metrics;
  host.onRefused = [&metrics](const char* kind) { metrics.observeRefusal(kind); };
  return SessionHost::start(std::move(host));
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

}  // namespace

Result<std::unique_ptr<ServedBackend>> ServedBackend::make(const Inputs& inputs) {
  const Options& options = inputs.options;
  std::unique_ptr<ServedBackend> backend(new ServedBackend(options));
  if (options.sessions == kPerPodSessions) {
    // Each process ends with its pod's last session, and with it the sockets GVirtuS leaks:
    // no leak restart is needed.
    auto host = startSessionHost(inputs);
    if (!host) {
      return fail(host.error().context("cannot serve sessions"));
    }
    backend->sessionHost_ = std::move(*host);
    return backend;
  }
  const bool leakRestarts = options.maxLeakedSockets > 0 && options.leakRestartMaxDefer.count() > 0;
  if (leakRestarts && inputs.client != nullptr) {
    ShimMetrics& metrics = inputs.metrics;
    backend->leakGate_ = makeLeakRestartGate(options, *inputs.client,
                                             [&metrics] { metrics.observeLeakRestartDeferred(); });
  } else if (leakRestarts) {
    log::info("a leak restart does not wait for another backend to be ready: no pod to read");
  }
  backend->supervisor_ =
      std::make_unique<Supervisor>(sharedSupervision(inputs, backend->leakGate_.get()));
  return backend;
}

void ServedBackend::start() {
  if (supervisor_) {
    supervisor_->start();
  }
  if (leakGate_) {
    leakGate_->start();
  }
}

Result<void> ServedBackend::ready() const {
  if (sessionHost_) {
    if (!sessionHost_->status().ready) {
      return fail("no backend process has reached its accept yet");
    }
    return {};
  }
  if (restartingForLeaks()) {
    return fail("restarting the backend to free leaked sockets once another backend is seen Ready");
  }
  const SupervisorStatus status = supervisor_->status();
  if (status.portWaiting) {
    return fail("waiting for the backend's port " + std::to_string(options_.port) +
                " to be free before starting it" +
                (status.portHeldBy.empty() ? "" : " (" + status.portHeldBy + ")"));
  }
  if (!status.running) {
    return fail("the backend is not running");
  }
  if (!status.listening) {
    return fail("the backend's port " + std::to_string(options_.port) + " is not listening");
  }
  return {};
}

SupervisorStatus ServedBackend::status() const {
  return sessionHost_ ? asBackendStatus(sessionHost_->status()) : supervisor_->status();
}

void ServedBackend::refuseNewSessions() {
  if (sessionHost_) {
    sessionHost_->refuseNewSessions();
  } else {
    supervisor_->holdRestarts();
  }
}

bool ServedBackend::waitForDrain(Duration timeout) {
  return sessionHost_ ? sessionHost_->waitForDrain(timeout) : supervisor_->waitForDrain(timeout);
}

void ServedBackend::stop() {
  if (sessionHost_) {
    sessionHost_->stop();
  } else {
    supervisor_->stop();
  }
  if (leakGate_) {
    leakGate_->stop();
  }
}

}  // namespace gvirtus::backend_shim
