#include "common/process/signals.h"

#include <pthread.h>
#include <signal.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "common/telemetry/log.h"
#include "common/time/stoppable_sleep.h"

namespace gvirtus {
namespace {

// The state behind every ShutdownSignal (the class itself holds nothing).
struct State {
  std::stop_source source;
  std::mutex mutex;
  std::condition_variable changed;
  bool claimed = false;  // a request was made (guarded by mutex)
  bool done = false;     // ... and its stop callbacks ran (guarded by mutex)
  int signal = 0;        // guarded by mutex
  int received = 0;      // signals taken by the signal thread (guarded by mutex)
  // deadline(): requested a grace period after `source`, by its own thread.
  std::once_flag deadlineStarted;
  std::stop_source deadline;
  std::jthread deadlineThread;
};

State& state() {
  static State instance;
  return instance;
}

// The first request wins; returns false when shutdown was already requested. Waiters
// wake only after the stop callbacks ran. `signal` is 0 for request().
bool requestStop(State& s, int signal) {
  {
    std::lock_guard lock(s.mutex);
    // Counted in the same section as the decision, so signalsReceived() never runs ahead
    // of it.
    if (signal != 0) {
      ++s.received;
    }
    if (s.claimed) {
      return false;
    }
    s.claimed = true;
    s.signal = signal;
  }
  s.source.request_stop();
  {
    std::lock_guard lock(s.mutex);
    s.done = true;
  }
  s.changed.notify_all();
  return true;
}

const char* signalName(int number) {
  switch (number) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return "signal";
  }
}

sigset_t shutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// The signal thread: waits for SIGTERM/SIGINT with sigwait (they are blocked everywhere),
// turns the first into a stop request and swallows the rest. When the thread itself is
// asked to stop (at exit), it wakes itself with a thread-directed SIGTERM.
void watchSignals(std::stop_token stop) {
  const sigset_t set = shutdownSignals();
  const pthread_t self = pthread_self();
  std::stop_callback wake(stop, [self] { pthread_kill(self, SIGTERM); });
  while (!stop.stop_requested()) {
    int number = 0;
    if (sigwait(&set, &number) != 0 || stop.stop_requested()) {
      continue;
    }
    if (requestStop(state(), number)) {
      log::info("shutting down", {{"signal", signalName(number)}});
    } else {
      log::info("already shutting down", {{"signal", signalName(number)}});
    }
  }
}

// Function-local statics, built on the first install(): blocking the signals comes
// before the thread starts, so the thread inherits the mask.
struct Installation {
  Installation() {
    const sigset_t set = shutdownSignals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    struct sigaction ignore;
    std::memset(&ignore, 0, sizeof(ignore));
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, nullptr);
    state();  // constructed before the thread, so destroyed after it
    thread = std::jthread(watchSignals);
  }
  std::jthread thread;
};

}  // namespace

ShutdownSignal& ShutdownSignal::install() {
  static Installation installation;
  static ShutdownSignal instance;
  return instance;
}

std::stop_token ShutdownSignal::token() const {
  return state().source.get_token();
}

std::stop_token ShutdownSignal::deadline(Duration grace) const {
  State& s = state();
  std::call_once(s.deadlineStarted, [&s, grace] {
    s.deadlineThread = std::jthread([&s, grace](std::stop_token exiting) {
      std::mutex mutex;
      std::condition_variable_any wake;
      std::stop_callback onShutdown(s.source.get_token(), [&mutex, &wake] {
        std::lock_guard lock(mutex);
        wake.notify_all();
      });
      std::unique_lock lock(mutex);
      if (!wake.wait(lock, exiting, [&s] { return s.source.stop_requested(); })) {
        return;  // the process exits without a shutdown request
      }
      lock.unlock();
      if (sleepUnlessStopped(exiting, grace)) {
        s.deadline.request_stop();
      }
    });
  });
  return s.deadline.get_token();
}

void ShutdownSignal::wait() const {
  State& s = state();
  std::unique_lock lock(s.mutex);
  s.changed.wait(lock, [&s] { return s.done; });
}

void ShutdownSignal::request() {
  requestStop(state(), 0);
}

int ShutdownSignal::signalNumber() const {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.signal;
}

int ShutdownSignal::signalsReceived() const {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.received;
}

}  // namespace gvirtus
