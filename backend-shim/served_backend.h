#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend-shim/backend/output.h"
#include "backend-shim/backend/supervisor.h"
#include "backend-shim/leak_restart/gate.h"
#include "backend-shim/load/metrics.h"
#include "backend-shim/options.h"
#include "backend-shim/peer_check.h"
#include "backend-shim/sessions/host.h"
#include "common/base/error.h"
#include "common/kube/client.h"

namespace gvirtus::backend_shim {

// The backend as run() serves it, one of two ways (--sessions): one shared gvirtus-backend
// process under a Supervisor (restarted when it dies or leaks too many sockets, the restart
// held by the leak-restart gate), or a SessionHost that gives each frontend pod a process of
// its own. run() asks it the same questions either way.
class ServedBackend {
 public:
  struct Inputs {
    const Options& options;
    // The backend's environment (the GVirtuS home, the hidden paths), before any preload.
    std::vector<std::string> env;
    // Whether libgvirtus-peer-guard.so goes into the shared backend (per-pod: always).
    bool preloaded = false;
    // Null with --peer-check=false.
    const PeerCheck* peerCheck = nullptr;
    // The pod's client; null without POD_NAME (then no leak-restart gate).
    KubeClient* client = nullptr;
    ShimMetrics& metrics;
    ProcessOutput output;
  };
  // Per pod, the host is started here (its first process waits at accept); shared, the
  // supervisor is made and start() starts it.
  static Result<std::unique_ptr<ServedBackend>> make(const Inputs& inputs);

  void start();
  // Why /readyz says no while the backend cannot take a session (an error), else ready.
  Result<void> ready() const;
  // As the monitor and the metrics see the backend, either way.
  SupervisorStatus status() const;
  // Shared: not ready while a restart for leaked sockets waits for another backend.
  bool restartingForLeaks() const { return leakGate_ && leakGate_->draining(); }

  // SIGTERM: no new session, no restart; the open ones may end within `timeout` (false:
  // some were left open). Then stop() ends the processes.
  void refuseNewSessions();
  bool waitForDrain(Duration timeout);
  void stop();

 private:
  explicit ServedBackend(const Options& options) : options_(options) {}

  const Options& options_;
  // Declared before the supervisor, which asks it.
  std::unique_ptr<LeakRestartGate> leakGate_;
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<SessionHost> sessionHost_;
};

}  // namespace gvirtus::backend_shim
