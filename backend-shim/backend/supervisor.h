#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend-shim/backend/listen_probe.h"
#include "backend-shim/backend/process_group.h"
#include "common/time/duration.h"

// Keeps the GVirtuS backend running: starts it, watches the process and its port, and
// restarts it with exponential backoff when it exits or when its port stops listening
// while the process lives on (GVirtuS's parent outlives its listening child).
namespace gvirtus::backend_shim {

struct SupervisorOptions {
  std::vector<std::string> argv;  // argv[0] an executable path; the config path last
  std::vector<std::string> env;   // the backend's whole environment
  uint16_t port = 9999;
  ReapScope reapScope = ReapScope::Leader;
  std::vector<std::string> probePaths = {"/proc/net/tcp", "/proc/net/tcp6"};

  // How often the process and the port are looked at.
  Duration probeInterval = std::chrono::milliseconds(500);
  // A backend that has not listened this long after its start is restarted.
  Duration startupTimeout = std::chrono::minutes(1);
  // A run that lasted this long resets the backoff.
  Duration stableAfter = std::chrono::minutes(1);
  // More sockets than this left in CLOSE_WAIT by finished clients (GVirtuS never closes
  // them) restart the backend, but only while no client is connected: a drain, never a
  // cut of live sessions. 0: never.
  int maxLeakedSockets = 0;
  // Asked on every pass, on the supervising thread (so it must not block), before a leak
  // restart: whether more than maxLeakedSockets are leaked, and whether the backend is idle (no
  // client, restarts not held). True lets the restart go now (LeakRestartGate: not while it
  // would take the last ready backends down). Empty: it goes as soon as both hold.
  std::function<bool(bool overLimit, bool idle)> leakRestartPermit;
  // How the backend binds its port: with SO_REUSEADDR that works (the peer guard is
  // preloaded and makes GVirtuS's request for it work) or without (GVirtuS alone). Each start
  // waits until a bind made this way succeeds. With it, only old connections that lack it
  // hold the port, those of a run that bound without it, so a backend that never asks for
  // it (a stand-in) is waited for all the same.
  bool reuseAddress = false;
  // How often a port that cannot be bound is tried again.
  Duration portPollInterval = std::chrono::milliseconds(100);
  // Where the backend's stdout and stderr go (BackendOutput's pipes); default the shim's.
  ProcessOutput output;
  // Between SIGTERM and SIGKILL when the backend's group is stopped.
  Duration stopTimeout = std::chrono::seconds(5);
  Duration backoffInitial = std::chrono::seconds(1);
  Duration backoffMax = std::chrono::minutes(1);
  double backoffJitter = 0.2;
  std::function<double()> random;  // for Backoff; empty: its default
  // Told of each restart as it is scheduled, on the supervising thread: the delay before it
  // and why. For tests and logs; empty: nothing.
  std::function<void(Duration delay, const std::string& reason)> onRestartScheduled;
};

struct SupervisorStatus {
  bool running = false;      // the backend process (its group's leader) is alive
  bool listening = false;    // the port is in LISTEN state
  int connections = 0;       // ESTABLISHED sockets on the port
  int leakedSockets = 0;     // CLOSE_WAIT sockets on the port
  int64_t leakRestarts = 0;  // restarts to free leaked sockets (counted in restarts too)
  int64_t starts = 0;
  int64_t restarts = 0;  // starts after the first
  pid_t pid = 0;         // the running backend's pid (and process group), 0 when none
  // Down and not started again because restarts are held: set by the pass that decided
  // so, and every later pass decides the same. Tests wait for it, not for time to pass.
  bool heldDown = false;
  // Looks of waitForDrain at the port that found clients still connected, so it waited on.
  int64_t drainWaits = 0;
  // A start is due but the port cannot be bound yet (old connections linger on it).
  bool portWaiting = false;
  int64_t portWaits = 0;       // starts that had to wait for the port
  double portWaitSeconds = 0;  // time spent waiting for it, the wait now included
  std::string portHeldBy;      // while waiting: the sockets on the port ("TIME_WAIT=2")
};

class Supervisor {
 public:
  explicit Supervisor(SupervisorOptions options);
  // Stops the backend (stop()).
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts the backend and the supervising thread.
  void start();
  SupervisorStatus status() const;
  // No more restarts: a backend that ends now stays down. For the drain before shutdown.
  void holdRestarts();
  // Waits until no connection is left on the port or `timeout` passes; true when drained.
  // Each change in the number of clients it waits on is logged at debug level.
  bool waitForDrain(Duration timeout);
  // Stops the backend's process group (SIGTERM, then SIGKILL after stopTimeout) and the
  // thread. Idempotent.
  void stop();

 private:
  // What one run of loop() keeps from one look to the next (supervisor.cpp).
  struct Run;
  // Every look, until `stop`: start the backend when due, reap it, read its port, judge it.
  void loop(std::stop_token stop);
  void startIfDue(Run& run);
  void reapExited(Run& run);
  // The port's sockets into the status; nullopt (logged once) when they cannot be read.
  std::optional<PortState> readPort(Run& run);
  // Listening: counted ready, restarted for leaked sockets when idle and permitted. Not
  // listening: restarted when it stopped, or never started within the startup timeout.
  void judgePort(Run& run, const std::optional<PortState>& port);
  // Not ready from now on; the group stopped, the next start after a backoff delay.
  void restartLater(Run& run, const std::string& why);
  // Whether the port can be bound now; keeps the wait's numbers in `status` and logs the
  // first look of each wait. A check that fails lets the start go ahead, as before it existed.
  bool portFree(SupervisorStatus& status);
  void setStatus(const SupervisorStatus& status);

  SupervisorOptions options_;
  ListenProbe probe_;
  std::atomic<bool> holdRestarts_{false};
  mutable std::mutex mutex_;
  SupervisorStatus status_;  // guarded by mutex_
  // Counted apart from status_, which the supervising thread overwrites whole.
  int64_t drainWaits_ = 0;  // guarded by mutex_
  // The wait for the port now, when there is one (the supervising thread's own).
  std::optional<std::chrono::steady_clock::time_point> portWaitSince_;
  double portWaitedSeconds_ = 0;  // in waits that ended
  bool portCheckErrorLogged_ = false;
  std::jthread thread_;
};

}  // namespace gvirtus::backend_shim
