#include "backend-shim/session_host.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>

#include "backend-shim/peer_guard/peer_guard_protocol.h"
#include "backend-shim/peer_list.h"
#include "backend-shim/refusal_log.h"
#include "backend-shim/session_process.h"
#include "common/backoff.h"
#include "common/log.h"
#include "common/sockets.h"

namespace gvirtus::backend_shim {
namespace {

namespace protocol = gvirtus::peer_guard;
using Clock = std::chrono::steady_clock;

constexpr int kAcceptsPerPass = 64;
// While killed processes are being reaped, the loop looks again this often.
constexpr auto kReapStep = std::chrono::milliseconds(20);

// A connection whose address the gate is being asked about.
struct Pending {
  UniqueFd connection;
  UniqueFd question;
  Ipv4 peer = 0;
  Clock::time_point deadline;
};

// An open connection: the shim's copy, watched for the frontend's hang-up.
struct Session {
  UniqueFd connection;
  SessionProcess* process = nullptr;
};

// Asks the gate about `peer` the way the guard does (peer_guard_protocol.h), without waiting
// for the answer: the socket it will come on, or an error.
Result<UniqueFd> askGate(const std::string& gate, Ipv4 peer) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (!fd.valid() || gate.size() >= sizeof(address.sun_path)) {
    return fail("cannot open a socket to the peer gate");
  }
  std::memcpy(address.sun_path, gate.c_str(), gate.size() + 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    return fail("cannot reach the peer gate: " + errnoText(errno));
  }
  uint8_t question[protocol::kRequestSize] = {};
  std::memcpy(question, protocol::kMagic, sizeof(protocol::kMagic));
  question[protocol::kAddressOffset + 10] = 0xff;
  question[protocol::kAddressOffset + 11] = 0xff;
  const uint32_t network = htonl(peer);
  std::memcpy(question + protocol::kAddressOffset + 12, &network, sizeof(network));
  if (::send(fd.get(), question, sizeof(question), MSG_NOSIGNAL) != sizeof(question)) {
    return fail("cannot ask the peer gate: " + errnoText(errno));
  }
  return fd;
}

int pollTimeout(Clock::time_point now, std::optional<Clock::time_point> next) {
  if (!next) {
    return -1;
  }
  if (*next <= now) {
    return 0;
  }
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

}  // namespace

// The host's thread: the listener, the gate's answers, the processes and the connections.
class SessionHost::Loop {
 public:
  explicit Loop(SessionHost& host)
      : host_(host),
        options_(host.options_),
        backoff_(options_.backoffInitial, options_.backoffMax) {}
  ~Loop();
  void run(const std::stop_token& stop);

 private:
  void fillPool(Clock::time_point now);
  SessionProcess* startProcess(Clock::time_point now);
  void acceptConnections(Clock::time_point now);
  void admit(UniqueFd connection, const sockaddr_in& peer, Clock::time_point now);
  void dispatch(UniqueFd connection, Ipv4 peer, Clock::time_point now);
  void refuse(UniqueFd connection, Ipv4 peer, const char* kind, const std::string& reason,
              Clock::time_point now);
  void readAnswers(const std::vector<pollfd>& fds, size_t first, Clock::time_point now);
  void watchProcesses(Clock::time_point now);
  void endSessions();
  void retire(SessionProcess* process);
  void lose(SessionProcess* process, const std::string& why, Clock::time_point now);
  std::optional<Clock::time_point> nextDeadline() const;
  SessionHostStatus status() const;

  SessionHost& host_;
  const SessionHostOptions& options_;
  Backoff backoff_;
  std::optional<Clock::time_point> nextStart_;  // a start waits for its backoff
  std::vector<std::unique_ptr<SessionProcess>> processes_;
  std::vector<std::unique_ptr<SessionProcess>> dying_;
  std::vector<Pending> pending_;
  std::vector<Session> sessions_;
  RefusalLog refusals_;
  int64_t starts_ = 0;
  int64_t lost_ = 0;
  int64_t refused_ = 0;
};

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
    fds.push_back({host_.listener_.get(), POLLIN, 0});
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
        sessions_[i].process = nullptr;  // marked; endSessions() closes it
      }
    }
    endSessions();
    watchProcesses(now);
    if ((fds[1].revents & POLLIN) != 0) {
      acceptConnections(now);
    }
  }
}

void SessionHost::Loop::fillPool(Clock::time_point now) {
  if (host_.draining_ || (nextStart_ && now < *nextStart_)) {
    return;
  }
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

void SessionHost::Loop::acceptConnections(Clock::time_point now) {
  for (int i = 0; i < kAcceptsPerPass; ++i) {
    sockaddr_in peer{};
    socklen_t length = sizeof(peer);
    // A blocking connection: the descriptor handed over is GVirtuS's, which reads it so.
    const int fd =
        ::accept4(host_.listener_.get(), reinterpret_cast<sockaddr*>(&peer), &length, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
        log::warn("cannot accept a connection", {{"error", errnoText(errno)}});
      }
      return;
    }
    admit(UniqueFd(fd), peer, now);
  }
}

void SessionHost::Loop::admit(UniqueFd connection, const sockaddr_in& peer, Clock::time_point now) {
  const Ipv4 address = ntohl(peer.sin_addr.s_addr);
  if (host_.draining_) {
    refuse(std::move(connection), address, "draining", "the backend is draining", now);
    return;
  }
  if (options_.gateSocket.empty()) {
    dispatch(std::move(connection), address, now);
    return;
  }
  if (pending_.size() >= options_.maxPending) {
    refuse(std::move(connection), address, "pending",
           "too many connections wait for the peer check", now);
    return;
  }
  auto question = askGate(options_.gateSocket, address);
  if (!question) {
    refuse(std::move(connection), address, "gate", question.error().message, now);
    return;
  }
  pending_.push_back(
      {std::move(connection), std::move(*question), address, now + options_.gateTimeout});
}

void SessionHost::Loop::readAnswers(const std::vector<pollfd>& fds, size_t first,
                                    Clock::time_point now) {
  // Answered or timed out, in place; the pollfds were built from pending_ in this order.
  std::vector<Pending> still;
  for (size_t i = 0; i < pending_.size(); ++i) {
    Pending& pending = pending_[i];
    if (fds[first + i].revents != 0) {
      uint8_t answer = 0;
      const ssize_t got = ::recv(pending.question.get(), &answer, 1, MSG_DONTWAIT);
      if (got == 1 && answer == protocol::kAllowed) {
        dispatch(std::move(pending.connection), pending.peer, now);
      } else {
        // The gate logged and counted its own refusals; these are not listed.
        pending.connection.reset();
        ++refused_;
        if (options_.onRefused) {
          options_.onRefused("not-a-peer");
        }
      }
      continue;
    }
    if (now >= pending.deadline) {
      refuse(std::move(pending.connection), pending.peer, "gate", "the peer gate did not answer",
             now);
      continue;
    }
    still.push_back(std::move(pending));
  }
  pending_ = std::move(still);
}

void SessionHost::Loop::dispatch(UniqueFd connection, Ipv4 peer, Clock::time_point now) {
  if (host_.draining_) {
    refuse(std::move(connection), peer, "draining", "the backend is draining", now);
    return;
  }
  SessionProcess* process = nullptr;
  int pods = 0;
  for (const auto& candidate : processes_) {
    pods += candidate->pod ? 1 : 0;
    if (candidate->pod == peer) {
      process = candidate.get();
    }
  }
  if (process != nullptr && process->connections >= options_.maxConnectionsPerPod) {
    refuse(std::move(connection), peer, "max-connections-per-pod",
           "the pod has " + std::to_string(process->connections) +
               " connections open, the most --max-connections-per-pod allows",
           now);
    return;
  }
  if (process == nullptr) {
    if (pods >= options_.maxSessions) {
      refuse(std::move(connection), peer, "max-sessions",
             "the backend serves " + std::to_string(pods) + " pods, the most --max-sessions allows",
             now);
      return;
    }
    // A waiting process that has reached its accept, else one still starting, else a new one.
    for (const auto& candidate : processes_) {
      if (!candidate->pod && (process == nullptr || (candidate->ready() && !process->ready()))) {
        process = candidate.get();
      }
    }
    if (process == nullptr && (process = startProcess(now)) == nullptr) {
      refuse(std::move(connection), peer, "start", "no session process could be started", now);
      return;
    }
    process->pod = peer;
    log::info("serving a pod in a process of its own",
              {{"peer", formatIpv4(peer)}, {"pid", process->pid()}});
  }
  if (auto handed = process->hand(connection.get()); !handed) {
    refuse(std::move(connection), peer, "handoff", handed.error().message, now);
    return;
  }
  ++process->connections;
  sessions_.push_back({std::move(connection), process});
}

void SessionHost::Loop::refuse(UniqueFd connection, Ipv4 peer, const char* kind,
                               const std::string& reason, Clock::time_point now) {
  connection.reset();
  ++refused_;
  if (options_.onRefused) {
    options_.onRefused(kind);
  }
  const std::string address = formatIpv4(peer);
  if (auto unlogged = refusals_.admit(address, now)) {
    log::warn("session refused",
              {{"peer", address}, {"reason", reason}, {"refusalsNotLogged", *unlogged}});
  }
}

void SessionHost::Loop::endSessions() {
  std::erase_if(sessions_, [this](Session& session) {
    if (session.process != nullptr) {
      return false;
    }
    return true;
  });
  for (const auto& process : processes_) {
    process->connections = 0;
  }
  for (const auto& session : sessions_) {
    ++session.process->connections;
  }
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
                [process](const Session& session) { return session.process == process; });
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

std::optional<Clock::time_point> SessionHost::Loop::nextDeadline() const {
  std::optional<Clock::time_point> next = nextStart_;
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

Result<std::unique_ptr<SessionHost>> SessionHost::start(SessionHostOptions options) {
  auto listener = openListener("0.0.0.0", options.port);
  if (!listener) {
    return fail(listener.error().context("listen on port " + std::to_string(options.port)));
  }
  if (::fcntl(listener->get(), F_SETFL, ::fcntl(listener->get(), F_GETFL) | O_NONBLOCK) != 0) {
    return fail("cannot listen on port " + std::to_string(options.port) + ": " + errnoText(errno));
  }
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) {
    return fail("cannot make an eventfd: " + errnoText(errno));
  }
  auto host = std::make_unique<SessionHost>(PassKey{}, std::move(options), std::move(*listener),
                                            std::move(wake));
  host->thread_ = std::jthread([raw = host.get()](std::stop_token stop) {
    Loop loop(*raw);
    loop.run(stop);
  });
  return host;
}

SessionHost::SessionHost(PassKey, SessionHostOptions options, UniqueFd listener, UniqueFd wake)
    : options_(std::move(options)), listener_(std::move(listener)), wake_(std::move(wake)) {}

SessionHost::~SessionHost() {
  stop();
}

void SessionHost::publish(const SessionHostStatus& status) {
  {
    std::lock_guard lock(mutex_);
    status_ = status;
  }
  changed_.notify_all();
}

SessionHostStatus SessionHost::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

void SessionHost::refuseNewSessions() {
  if (!draining_.exchange(true)) {
    log::info("refusing every new session: the backend is draining");
  }
  const uint64_t one = 1;
  (void)::write(wake_.get(), &one, sizeof(one));
}

bool SessionHost::waitForDrain(Duration timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [this] { return status_.connections == 0; });
}

void SessionHost::stop() {
  if (!thread_.joinable()) {
    return;
  }
  thread_.request_stop();
  const uint64_t one = 1;
  (void)::write(wake_.get(), &one, sizeof(one));
  thread_.join();
  std::lock_guard lock(mutex_);
  status_.listening = false;
  status_.ready = false;
}

}  // namespace gvirtus::backend_shim
