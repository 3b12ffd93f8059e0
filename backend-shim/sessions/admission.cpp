#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "backend-shim/peer_guard/peer_guard_protocol.h"
#include "backend-shim/sessions/loop.h"
#include "common/net/sockets.h"
#include "common/telemetry/log.h"

// SessionHost's thread: a connection from accept to its pod's process, or to its refusal.
namespace gvirtus::backend_shim {
namespace {

namespace protocol = gvirtus::peer_guard;
using Clock = SessionClock;

constexpr int kAcceptsPerPass = 64;
constexpr auto kRefillDelay = std::chrono::milliseconds(50);
// Out of file descriptors, the listener stays readable: it is left out of the poll this long
// instead of spinning (the connections wait in the backlog).
constexpr auto kFdLimitPause = std::chrono::milliseconds(100);

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

}  // namespace

void SessionHost::Loop::acceptConnections(Clock::time_point now) {
  for (int i = 0; i < kAcceptsPerPass; ++i) {
    sockaddr_in peer{};
    socklen_t length = sizeof(peer);
    // A blocking connection: the descriptor handed over is GVirtuS's, which reads it so.
    const int fd =
        ::accept4(host_.listener_.get(), reinterpret_cast<sockaddr*>(&peer), &length, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        if (!listenerPausedUntil_) {
          log::warn("out of file descriptors: accepting again in a moment",
                    {{"error", errnoText(errno)}});
        }
        listenerPausedUntil_ = now + kFdLimitPause;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                 errno != ECONNABORTED) {
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
  std::vector<PendingSession> still;
  for (size_t i = 0; i < pending_.size(); ++i) {
    PendingSession& pending = pending_[i];
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
    const uint64_t share = options_.gpuMemoryShare ? options_.gpuMemoryShare(peer).value_or(0) : 0;
    if (share != 0) {
      if (auto told = process->limit(share); !told) {
        refuse(std::move(connection), peer, "handoff", told.error().message, now);
        retire(process);
        return;
      }
      process->gpuMemoryShare = share;
    }
    process->pod = peer;
    const bool anotherWaits =
        std::any_of(processes_.begin(), processes_.end(),
                    [](const auto& other) { return !other->pod && other->ready(); });
    if (anotherWaits) {
      refillAt_ = now + kRefillDelay;
    }
    log::info("serving a pod in a process of its own",
              {{"peer", formatIpv4(peer)},
               {"pid", process->pid()},
               {"gpuMemoryShareMiB", static_cast<int64_t>(share >> 20)}});
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

}  // namespace gvirtus::backend_shim
