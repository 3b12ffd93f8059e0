#include "backend-shim/backend/supervisor.h"

#include <algorithm>
#include <optional>

#include "backend-shim/backend/port_bind_check.h"
#include "common/telemetry/log.h"
#include "common/time/backoff.h"
#include "common/time/stoppable_sleep.h"

namespace gvirtus::backend_shim {
namespace {

using Clock = std::chrono::steady_clock;

std::string joinCommand(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& arg : argv) {
    if (!out.empty()) {
      out += ' ';
    }
    out += arg;
  }
  return out;
}

Duration since(Clock::time_point then) {
  return std::chrono::duration_cast<Duration>(Clock::now() - then);
}

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Until the next pass: a probe interval, but no later than a start that is due (the end of
// the backoff, or the next try of a port that could not be bound), so that the backend
// starts the moment it can.
Duration pauseBeforeNextLook(const SupervisorStatus& status, bool running,
                             Clock::time_point nextStart, const SupervisorOptions& options) {
  if (running || status.heldDown) {
    return options.probeInterval;
  }
  if (status.portWaiting) {
    return std::min(options.probeInterval, options.portPollInterval);
  }
  const auto untilDue = std::chrono::ceil<Duration>(nextStart - Clock::now());
  return std::clamp<Duration>(untilDue, std::chrono::milliseconds(1), options.probeInterval);
}

}  // namespace

Supervisor::Supervisor(SupervisorOptions options)
    : options_(std::move(options)), probe_(options_.probePaths) {}

Supervisor::~Supervisor() {
  stop();
}

void Supervisor::start() {
  if (!thread_.joinable()) {
    thread_ = std::jthread([this](std::stop_token stop) { loop(stop); });
  }
}

SupervisorStatus Supervisor::status() const {
  std::lock_guard lock(mutex_);
  SupervisorStatus status = status_;
  status.drainWaits = drainWaits_;
  return status;
}

void Supervisor::setStatus(const SupervisorStatus& status) {
  std::lock_guard lock(mutex_);
  status_ = status;
}

void Supervisor::holdRestarts() {
  holdRestarts_ = true;
}

bool Supervisor::waitForDrain(Duration timeout) {
  const auto deadline = Clock::now() + timeout;
  int clientsLogged = -1;
  for (;;) {
    // Fresh numbers, not the last tick's: a client that just left counts as gone.
    auto state = probe_.probe(options_.port);
    if (state && state->established == 0) {
      return true;
    }
    if (state) {
      {
        std::lock_guard lock(mutex_);
        ++drainWaits_;
      }
      if (state->established != clientsLogged) {
        log::debug("draining: clients still connected", {{"connections", state->established}});
        clientsLogged = state->established;
      }
    }
    if (Clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(
        std::min<Duration>(options_.probeInterval, std::chrono::milliseconds(200)));
  }
}

void Supervisor::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

bool Supervisor::portFree(SupervisorStatus& status) {
  const auto now = Clock::now();
  auto bindable = portBindable(options_.port, options_.reuseAddress);
  if (!bindable && !portCheckErrorLogged_) {
    log::warn("cannot tell whether the backend's port is free; starting the backend anyway",
              {{"error", bindable.error().message}});
    portCheckErrorLogged_ = true;
  }
  if (!bindable || *bindable) {
    if (portWaitSince_) {
      portWaitedSeconds_ += seconds(now - *portWaitSince_);
      log::info("the backend's port is free again; starting the backend",
                {{"port", options_.port}, {"waited", formatDuration(since(*portWaitSince_))}});
      portWaitSince_.reset();
    }
    status.portWaiting = false;
    status.portHeldBy.clear();
    status.portWaitSeconds = portWaitedSeconds_;
    return true;
  }
  if (!portWaitSince_) {
    portWaitSince_ = now;
    ++status.portWaits;
    auto state = probe_.probe(options_.port);
    status.portHeldBy = state ? describeSockets(*state) : "";
    log::warn(
        "waiting for the backend's port to be free before starting the backend: started now, "
        "it would fail to bind and never listen",
        {{"port", options_.port},
         {"reuseAddress", options_.reuseAddress},
         {"sockets", status.portHeldBy.empty()
                         ? std::string("none in /proc/net/tcp (one bound but not listening?)")
                         : status.portHeldBy},
         {"retryEvery", formatDuration(options_.portPollInterval)}});
  }
  status.portWaiting = true;
  status.portWaitSeconds = portWaitedSeconds_ + seconds(now - *portWaitSince_);
  return false;
}

struct Supervisor::Run {
  explicit Run(const SupervisorOptions& options)
      : backoff(options.backoffInitial, options.backoffMax, 2.0, options.backoffJitter,
                options.random) {}
  Backoff backoff;
  std::optional<ProcessGroup> group;
  SupervisorStatus status;
  Clock::time_point startedAt{};
  Clock::time_point nextStart = Clock::now();
  bool seenListening = false;
  bool probeFailedLogged = false;
};

void Supervisor::loop(std::stop_token stop) {
  Run run(options_);
  while (!stop.stop_requested()) {
    startIfDue(run);
    reapExited(run);
    judgePort(run, readPort(run));
    setStatus(run.status);
    sleepUnlessStopped(
        stop, pauseBeforeNextLook(run.status, run.group.has_value(), run.nextStart, options_));
  }

  if (run.group) {
    log::info("stopping the backend", {{"pid", run.group->pid()}});
    auto exited = run.group->stop(options_.stopTimeout);
    log::info("the backend stopped",
              {{"status", exited ? exited->describe() : std::string("unknown")}});
  }
  if (options_.reapScope == ReapScope::AnyChild) {
    reapAnyChildren();
  }
  run.status.running = false;
  run.status.listening = false;
  run.status.pid = 0;
  setStatus(run.status);
}

void Supervisor::restartLater(Run& run, const std::string& why) {
  SupervisorStatus& status = run.status;
  const Duration uptime = since(run.startedAt);
  // Not ready from now on: stopping the group can take stopTimeout, and the backend
  // must not be handed new pods meanwhile.
  status.running = false;
  status.listening = false;
  status.pid = 0;
  setStatus(status);
  if (run.group) {
    run.group->stop(options_.stopTimeout);
    run.group.reset();
  }
  if (uptime >= options_.stableAfter) {
    run.backoff.reset();
  }
  const Duration delay = run.backoff.next();
  run.nextStart = Clock::now() + delay;
  status.running = false;
  status.pid = 0;
  log::warn("the backend will be restarted",
            {{"reason", why}, {"uptime", formatDuration(uptime)}, {"in", formatDuration(delay)}});
  if (options_.onRestartScheduled) {
    options_.onRestartScheduled(delay, why);
  }
}

void Supervisor::startIfDue(Run& run) {
  SupervisorStatus& status = run.status;
  if (!run.group && holdRestarts_) {
    status.heldDown = true;  // draining: a backend that ended stays down
    status.portWaiting = false;
    return;
  }
  if (run.group || Clock::now() < run.nextStart || !portFree(status)) {
    return;
  }
  // The startup timeout counts from here: the wait for the port is not part of it.
  auto started =
      ProcessGroup::start(options_.argv, options_.env, options_.reapScope, options_.output);
  run.startedAt = Clock::now();
  run.seenListening = false;
  if (status.starts > 0) {
    ++status.restarts;
  }
  ++status.starts;
  if (!started) {
    restartLater(run, started.error().message);
    return;
  }
  run.group.emplace(std::move(*started));
  status.running = true;
  status.pid = run.group->pid();
  log::info("started the backend",
            {{"pid", run.group->pid()}, {"command", joinCommand(options_.argv)}});
}

void Supervisor::reapExited(Run& run) {
  if (!run.group) {
    if (options_.reapScope == ReapScope::AnyChild) {
      reapAnyChildren();
    }
    return;
  }
  auto exited = run.group->reap();
  if (!exited) {
    return;
  }
  if (!holdRestarts_) {
    restartLater(run, "the backend exited: " + exited->describe());
    return;
  }
  log::info("the backend exited while draining", {{"status", exited->describe()}});
  run.group->stop(options_.stopTimeout);
  run.group.reset();
  run.status.running = false;
  run.status.pid = 0;
}

std::optional<PortState> Supervisor::readPort(Run& run) {
  auto state = probe_.probe(options_.port);
  if (!state) {
    if (!run.probeFailedLogged) {
      log::error("cannot read the port's state", {{"error", state.error().message}});
      run.probeFailedLogged = true;
    }
    return std::nullopt;
  }
  run.probeFailedLogged = false;
  // Only the backend this supervisor runs counts: a port held by anything else (an
  // orphan of a stopped run) is not a ready backend.
  SupervisorStatus& status = run.status;
  status.listening = run.group.has_value() && state->listening;
  status.connections = state->established;
  status.leakedSockets = state->closeWait;
  if (status.portWaiting) {
    status.portHeldBy = describeSockets(*state);
  }
  return std::move(*state);
}

void Supervisor::judgePort(Run& run, const std::optional<PortState>& state) {
  // A leak restart is due when more sockets leaked than allowed and no client is connected;
  // the permit is asked on every pass, due or not, and may hold it.
  const bool listening = run.group && state && state->listening;
  const bool overLimit =
      listening && options_.maxLeakedSockets > 0 && state->closeWait > options_.maxLeakedSockets;
  const bool idle = listening && state->established == 0 && !holdRestarts_;
  const bool permitted = !options_.leakRestartPermit || options_.leakRestartPermit(overLimit, idle);
  if (!run.group || !state) {
    return;
  }
  if (state->listening) {
    if (!run.seenListening) {
      log::info("the backend is listening",
                {{"port", options_.port}, {"after", formatDuration(since(run.startedAt))}});
    }
    run.seenListening = true;
    if (overLimit && idle && permitted) {
      ++run.status.leakRestarts;
      restartLater(run, std::to_string(state->closeWait) +
                            " sockets of finished clients left open (CLOSE_WAIT), more than " +
                            std::to_string(options_.maxLeakedSockets) +
                            ", and no client connected");
    }
  } else if (!holdRestarts_) {
    if (run.seenListening) {
      restartLater(run, "its port " + std::to_string(options_.port) +
                            " stopped listening while the process lives on");
    } else if (since(run.startedAt) >= options_.startupTimeout) {
      restartLater(run, "its port " + std::to_string(options_.port) + " did not listen within " +
                            formatDuration(options_.startupTimeout));
    }
  }
}

}  // namespace gvirtus::backend_shim
