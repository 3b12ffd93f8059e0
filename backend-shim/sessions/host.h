#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend-shim/backend/process_group.h"
#include "backend-shim/peers/list.h"
#include "common/base/error.h"
#include "common/base/unique_fd.h"
#include "common/time/duration.h"

// --sessions=per-pod: the shim owns the backend's port and gives every frontend pod a backend
// process of its own (SessionProcess). It accepts each connection, has the peer gate check
// its address without holding up the next accept, and hands the connection itself (the
// descriptor, SCM_RIGHTS) to the process of that pod, started from a pool of processes
// already waiting. A pod's process ends when its last connection closes; a process that ends
// on its own takes only its own pod's connections with it.
namespace gvirtus::backend_shim {

struct SessionHostOptions {
  uint16_t port = 9999;
  std::vector<std::string> argv;  // the backend, config path last
  std::vector<std::string> env;   // its environment, the guard preloaded
  ProcessOutput output;
  // Processes started and waiting for a pod.
  int pool = 2;
  // Pods served at once; a new pod past it is refused.
  int maxSessions = 16;
  // Open connections of one pod; one more is refused.
  int maxConnectionsPerPod = 64;
  // The peer gate's unix socket; empty: every peer is let in (--peer-check=false).
  std::string gateSocket;
  // Longest wait for the gate's answer; it answers within its own --peer-wait.
  Duration gateTimeout = std::chrono::seconds(5);
  // Connections waiting for the gate at once; more are refused at once.
  size_t maxPending = 1024;
  // A process that has not reached its first accept this long after its start is killed.
  Duration startupTimeout = std::chrono::minutes(1);
  Duration backoffInitial = std::chrono::seconds(1);
  Duration backoffMax = std::chrono::minutes(1);
  // The GPU memory share of the pod at an address, in bytes, given to the pod's process before
  // its first connection (the guard refuses allocations past it); nullopt or 0: none. Asked
  // on the host's thread: it must not block. Empty: no pod has a share.
  std::function<std::optional<uint64_t>(Ipv4 pod)> gpuMemoryShare;
  // Told of each connection refused, with its kind (ShimMetrics::observeRefusal), on the
  // host's thread.
  std::function<void(const char* kind)> onRefused;
};

struct SessionHostStatus {
  bool listening = false;
  bool ready = false;   // listening, not draining, and a process has reached its accept
  int connections = 0;  // open connections, all pods
  int pods = 0;         // pods served now, one process each
  int idle = 0;         // processes waiting for a pod
  int pending = 0;      // connections waiting for the gate
  int64_t processStarts = 0;
  int64_t processesLost = 0;  // ended on their own while serving a pod
  int64_t refused = 0;
};

class SessionHost {
 public:
  // Binds and listens on the port (every IPv4 address, as GVirtuS does) and starts the
  // host's thread, which fills the pool.
  static Result<std::unique_ptr<SessionHost>> start(SessionHostOptions options);
  // stop().
  ~SessionHost();
  SessionHost(const SessionHost&) = delete;
  SessionHost& operator=(const SessionHost&) = delete;

  SessionHostStatus status() const;
  // The drain: every new connection is refused from now on; open ones go on.
  void refuseNewSessions();
  // Waits until no connection is open or `timeout` passes; true when none is.
  bool waitForDrain(Duration timeout);
  // Stops the thread and kills every process. Idempotent.
  void stop();

  class PassKey {
    friend class SessionHost;
    explicit PassKey() = default;
  };
  SessionHost(PassKey, SessionHostOptions options, UniqueFd listener, UniqueFd wake);

 private:
  class Loop;
  void publish(const SessionHostStatus& status);

  SessionHostOptions options_;
  UniqueFd listener_;
  UniqueFd wake_;  // an eventfd: the drain, or stop
  std::atomic<bool> draining_{false};
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  SessionHostStatus status_;  // guarded by mutex_
  std::jthread thread_;
};

}  // namespace gvirtus::backend_shim
