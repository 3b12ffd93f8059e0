#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "backend-shim/leak_restart/decision.h"
#include "common/base/error.h"
#include "common/time/clock.h"
#include "common/time/duration.h"

namespace gvirtus {
class KubeClient;
}

// Holds a leak restart (--max-leaked-sockets), which can wait, until another backend pod is
// Ready, so that backends that reach their limit together never take the last ready ones
// down together. Due, it looks at the backend pods: with none other Ready it defers (counted,
// logged) and looks again 30-60 s later. With one, it makes this pod not ready and waits
// until the API server shows this pod not Ready, looking each second that another still is
// (else it is ready again at once, and defers); then a random moment more, and one last look
// lets the restart go. Two shims deciding at once cannot both see the other still Ready at
// their last look, each having waited to be seen not Ready first: at most one goes. After
// --leak-restart-max-defer it goes anyway (a cluster of one backend). A client that connects
// meanwhile ends the wait (the restart waits for an idle backend, as it always did).
namespace gvirtus::backend_shim {

struct LeakRestartGateOptions {
  std::string self;  // this pod's name
  // The backend pods, read fresh from the API server (no cache: the look must see what the
  // other shims did a moment ago).
  std::function<Result<std::vector<BackendPod>>()> listBackends;
  Duration maxDefer = std::chrono::minutes(5);
  // How often a due restart is looked for, and this pod's readiness while it settles.
  Duration look = std::chrono::seconds(1);
  // After a deferral: this, plus up to as much again at random (never past maxDefer).
  Duration retry = std::chrono::seconds(30);
  // The most this pod waits for the API server to show it not Ready (the kubelet's
  // readiness probe: periodSeconds x failureThreshold, 10 s in the manifests).
  Duration settleTimeout = std::chrono::seconds(30);
  // The most it waits after that, at random, before it looks again.
  Duration jitter = std::chrono::seconds(5);
  std::function<double()> random;  // in [0, 1); empty: a seeded generator
  Clock* clock = &systemClock();
  // Told of each deferral (for the metric), on the gate's thread.
  std::function<void()> onDeferred;
};

class LeakRestartGate {
 public:
  explicit LeakRestartGate(LeakRestartGateOptions options);
  ~LeakRestartGate();
  LeakRestartGate(const LeakRestartGate&) = delete;
  LeakRestartGate& operator=(const LeakRestartGate&) = delete;

  // Starts the thread that reads the API server; stop() ends it (idempotent).
  void start();
  void stop();

  // The supervisor, on every pass (it never blocks): whether more sockets leaked than
  // allowed, and whether the backend is idle (no client, not draining). True: restart now.
  // Not over the limit any more (the backend was restarted) starts the next wait afresh.
  bool permit(bool overLimit, bool idle);
  // Not ready: it checks, before a restart, that another backend stays Ready; and from the
  // permit to the restart (the next pass), so that no readiness probe finds it ready between.
  bool draining() const;
  int64_t deferrals() const;
  int64_t permits() const;  // restarts let go

 private:
  enum class Phase { First, Settling, Last };
  // Wait: deferred. Drain: another backend is Ready, go on (not ready, settling). Settled:
  // this pod shows not Ready. Go: granted. Cancelled: not due any more, or stopping.
  enum class Step { Wait, Drain, Settled, Go, Cancelled };
  void loop(std::stop_token stop);
  // One look at the backend pods: Wait (deferred) when no other is Ready; else what `phase`
  // leads to (Go at once past maxDefer).
  Step look(Phase phase);
  // Not ready until the API server shows this pod not Ready (or settleTimeout passes), while
  // every look still finds another backend Ready.
  Step settle(const std::stop_token& stop);
  void defer(const std::string& reason, Duration deferredFor);
  bool wanted() const;
  std::optional<Duration> dueFor() const;
  void setDraining(bool draining);
  void grant(const std::string& reason);

  LeakRestartGateOptions options_;
  mutable std::mutex mutex_;
  bool overLimit_ = false;  // guarded by mutex_, as are the fields below
  bool idle_ = false;
  std::optional<Clock::TimePoint> dueSince_;  // over the limit since
  bool draining_ = false;
  bool granted_ = false;
  bool restarting_ = false;  // the permit was taken: over the limit still, until the restart
  int64_t deferrals_ = 0;
  int64_t permits_ = 0;
  std::jthread thread_;
};

// The pods of `selector` in `ns`, listed through `client` (which must outlive the function).
std::function<Result<std::vector<BackendPod>>()> backendPodLister(KubeClient& client,
                                                                  std::string ns,
                                                                  std::string selector);

}  // namespace gvirtus::backend_shim
