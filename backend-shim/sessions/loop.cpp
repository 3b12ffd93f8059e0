#include "backend-shim/sessions/loop.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "backend-shim/peers/poll_timeout.h"
#include "common/net/sockets.h"
#include "common/telemetry/log.h"

namespace gvirtus::backend_shim {
namespace {

using Clock = SessionClock;

// While killed processes are being reaped, the loop looks again this often.
constexpr auto kReapStep = std::chrono::milliseconds(20);
// How often the served pods' shares are looked at again.
constexpr auto kSharesEvery = std::chrono::seconds(1);

}  // namespace

SessionHost::Loop::~Loop() {
  sessions_.clear();
  for (auto& process : processes_) {
    process->kill();
  }
  // Each destructor waits for its group to be gone.
  processes_.clear();
  dying_.clear();
}

void SessionHost::Loop::run(const std::stop_token& stop) {
  std::vector<pollfd> fds;
  while (!stop.stop_requested()) {
    auto now = Clock::now();
    fillPool(now);
    host_.publish(status());

    fds.clear();
    fds.push_back({host_.wake_.get(), POLLIN, 0});
    if (listenerPausedUntil_ && now >= *listenerPausedUntil_) {
      listenerPausedUntil_.reset();
    }
    fds.push_back({listenerPausedUntil_ ? -1 : host_.listener_.get(), POLLIN, 0});
    const size_t firstPending = fds.size();
    for (const auto& pending : pending_) {
      fds.push_back({pending.question.get(), POLLIN, 0});
    }
    const size_t firstSession = fds.size();
    const size_t sessionCount = sessions_.size();
    for (const auto& session : sessions_) {
      fds.push_back({session.connection.get(), POLLRDHUP, 0});
    }
    for (const auto& process : processes_) {
      fds.push_back({process->control(), POLLIN, 0});
      fds.push_back({process->leaderExit(), POLLIN, 0});
      fds.push_back({process->serverExit(), POLLIN, 0});  // -1 until announced: ignored
    }
    const int ready = ::poll(fds.data(), fds.size(), pollTimeout(Clock::now(), nextDeadline()));
    if (ready < 0 && errno != EINTR) {
      log::error("the session host cannot poll", {{"error", errnoText(errno)}});
      return;
    }
    now = Clock::now();
    if ((fds[0].revents & POLLIN) != 0) {
      uint64_t ignored = 0;
      (void)::read(host_.wake_.get(), &ignored, sizeof(ignored));
    }
    readAnswers(fds, firstPending, now);
    // Hang-ups first: a connection that ended frees its place before new ones are counted.
    for (size_t i = 0; i < sessionCount; ++i) {
      if ((fds[firstSession + i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) {
        sessions_[i].ended = true;
      }
    }
    endSessions();
    watchProcesses(now);
    refreshShares(now);
    if ((fds[1].revents & POLLIN) != 0) {
      acceptConnections(now);
    }
  }
}

void SessionHost::Loop::fillPool(Clock::time_point now) {
  if (host_.draining_ || (nextStart_ && now < *nextStart_) || (refillAt_ && now < *refillAt_)) {
    return;
  }
  refillAt_.reset();
  int idle = 0;
  for (const auto& process : processes_) {
    idle += process->pod ? 0 : 1;
  }
  for (; idle < options_.pool; ++idle) {
    if (startProcess(now) == nullptr) {
      return;
    }
  }
}

SessionProcess* SessionHost::Loop::startProcess(Clock::time_point now) {
  auto started = SessionProcess::start(options_.argv, options_.env, options_.port, options_.output);
  if (!started) {
    const auto delay = backoff_.next();
    nextStart_ = now + delay;
    log::error("cannot start a session process",
               {{"error", started.error().message}, {"retryIn", formatDuration(delay)}});
    return nullptr;
  }
  ++starts_;
  processes_.push_back(std::move(*started));
  return processes_.back().get();
}

void SessionHost::Loop::endSessions() {
  std::erase_if(sessions_, [](const OpenSession& session) {
    if (session.ended) {
      --session.process->connections;
    }
    return session.ended;
  });
  // Pods whose last connection ended, and pods given a process whose handoff failed.
  std::vector<SessionProcess*> done;
  for (const auto& process : processes_) {
    if (process->pod && process->connections == 0) {
      done.push_back(process.get());
    }
  }
  for (SessionProcess* process : done) {
    log::debug("a pod's last connection closed; its process ends",
               {{"peer", formatIpv4(*process->pod)}, {"pid", process->pid()}});
    retire(process);
  }
}

void SessionHost::Loop::retire(SessionProcess* process) {
  std::erase_if(sessions_,
                [process](const OpenSession& session) { return session.process == process; });
  process->kill();
  auto at = std::find_if(processes_.begin(), processes_.end(),
                         [process](const auto& held) { return held.get() == process; });
  if (at != processes_.end()) {
    dying_.push_back(std::move(*at));
    processes_.erase(at);
  }
}

void SessionHost::Loop::lose(SessionProcess* process, const std::string& why,
                             Clock::time_point now) {
  if (!process->ready()) {
    const auto delay = backoff_.next();
    nextStart_ = now + delay;
    log::error("a session process ended before it accepted",
               {{"pid", process->pid()}, {"why", why}, {"retryIn", formatDuration(delay)}});
  } else if (process->pod) {
    ++lost_;
    log::warn("a pod's session process ended; that pod's connections are closed, no other's",
              {{"peer", formatIpv4(*process->pod)},
               {"pid", process->pid()},
               {"connections", process->connections},
               {"why", why}});
  }
  retire(process);
}

void SessionHost::Loop::watchProcesses(Clock::time_point now) {
  std::vector<std::pair<SessionProcess*, std::string>> lost;
  for (const auto& process : processes_) {
    pollfd watch[3] = {{process->control(), POLLIN, 0},
                       {process->leaderExit(), POLLIN, 0},
                       {process->serverExit(), POLLIN, 0}};
    (void)::poll(watch, 3, 0);
    if ((watch[1].revents & POLLIN) != 0) {
      process->gone();  // collects the leader's status for the log
      const auto status = process->leaderStatus();
      lost.emplace_back(process.get(), "its process " + (status ? status->describe() : "ended"));
    } else if ((watch[2].revents & POLLIN) != 0) {
      lost.emplace_back(process.get(), "its accepting process ended");
    } else if (watch[0].revents != 0) {
      if (auto announced = process->readAnnouncement(); !announced) {
        lost.emplace_back(process.get(), announced.error().message);
      } else if (*announced) {
        backoff_.reset();
        nextStart_.reset();
      }
    } else if (!process->ready() && now - process->started >= options_.startupTimeout) {
      lost.emplace_back(process.get(),
                        "it did not accept within " + formatDuration(options_.startupTimeout));
    }
  }
  for (auto& [process, why] : lost) {
    lose(process, why, now);
  }
  std::erase_if(dying_, [](const auto& process) { return process->gone(); });
  if (dying_.empty()) {
    (void)reapAnyChildren();  // orphans of killed groups, reparented to the shim
  }
}

void SessionHost::Loop::refreshShares(Clock::time_point now) {
  if (!options_.gpuMemoryShare || now < sharesDue_) {
    return;
  }
  sharesDue_ = now + kSharesEvery;
  std::vector<SessionProcess*> failed;
  for (const auto& process : processes_) {
    if (!process->pod) {
      continue;
    }
    // A share given is changed, never taken away while the pod is served: a record that lost
    // it for a moment (a load report that did not parse) must not lift the cap.
    const uint64_t share = options_.gpuMemoryShare(*process->pod).value_or(0);
    if (share == 0 || share == process->gpuMemoryShare) {
      continue;
    }
    if (auto told = process->limit(share); !told) {
      failed.push_back(process.get());
      continue;
    }
    log::info("a served pod's GPU memory share changed",
              {{"peer", formatIpv4(*process->pod)},
               {"pid", process->pid()},
               {"gpuMemoryShareMiB", static_cast<int64_t>(share >> 20)}});
    process->gpuMemoryShare = share;
  }
  // A process that cannot be told its limit does not serve past it (it is most likely gone).
  for (SessionProcess* process : failed) {
    lose(process, "its GPU memory share could not be sent", now);
  }
}

std::optional<Clock::time_point> SessionHost::Loop::nextDeadline() const {
  std::optional<Clock::time_point> next = nextStart_;
  if (refillAt_ && (!next || *refillAt_ < *next)) {
    next = refillAt_;
  }
  if (listenerPausedUntil_ && (!next || *listenerPausedUntil_ < *next)) {
    next = listenerPausedUntil_;
  }
  auto earlier = [&next](Clock::time_point at) {
    if (!next || at < *next) {
      next = at;
    }
  };
  for (const auto& pending : pending_) {
    earlier(pending.deadline);
  }
  for (const auto& process : processes_) {
    if (!process->ready()) {
      earlier(process->started + options_.startupTimeout);
    }
  }
  if (!dying_.empty()) {
    earlier(Clock::now() + kReapStep);
  }
  if (options_.gpuMemoryShare &&
      std::any_of(processes_.begin(), processes_.end(),
                  [](const auto& process) { return process->pod.has_value(); })) {
    earlier(sharesDue_);
  }
  return next;
}

SessionHostStatus SessionHost::Loop::status() const {
  SessionHostStatus status;
  status.listening = true;
  status.connections = static_cast<int>(sessions_.size());
  status.pending = static_cast<int>(pending_.size());
  bool accepting = false;
  for (const auto& process : processes_) {
    status.pods += process->pod ? 1 : 0;
    status.idle += process->pod ? 0 : 1;
    accepting = accepting || process->ready();
  }
  status.ready = accepting && !host_.draining_;
  status.processStarts = starts_;
  status.processesLost = lost_;
  status.refused = refused_;
  return status;
}

}  // namespace gvirtus::backend_shim
