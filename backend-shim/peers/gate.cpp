#include "backend-shim/peers/gate.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <optional>
#include <vector>

#include "backend-shim/peer_guard/peer_guard_protocol.h"
#include "backend-shim/peers/guard_question.h"
#include "backend-shim/peers/poll_timeout.h"
#include "backend-shim/peers/private_unix_listener.h"
#include "backend-shim/peers/refusal_log.h"
#include "common/net/sockets.h"
#include "common/telemetry/log.h"

namespace gvirtus::backend_shim {
namespace {

namespace protocol = gvirtus::peer_guard;
using Clock = std::chrono::steady_clock;

constexpr int kBacklog = 512;
constexpr auto kFdLimitPause = std::chrono::milliseconds(100);
constexpr const char* kFolderPrefix = "gvirtus-peer-gate-";
constexpr const char* kSocketName = "gate.sock";
constexpr const char* kDraining = "the backend is draining: it takes no new session";

struct Question {
  UniqueFd fd;
  GuardQuestion bytes{};
  size_t received = 0;
  bool waiting = false;  // for a list that holds the peer
  QuestionPeer peer;
  Clock::time_point deadline{};  // of the read, then of the wait
  bool done = false;
};

}  // namespace

// The gate's thread: its socket, the open questions and the log of refusals.
class PeerGate::Loop {
 public:
  explicit Loop(PeerGate& gate) : gate_(gate) {}
  void run(const std::stop_token& stop);

 private:
  void acceptQuestions(Clock::time_point now);
  void read(Question& question, Clock::time_point now);
  void decide(Question& question, Clock::time_point now);
  void recheck(Clock::time_point now);
  void expire(Clock::time_point now);
  void answer(Question& question, bool allowed, const char* reason, Clock::time_point now);
  std::optional<Clock::time_point> nextDeadline() const;

  PeerGate& gate_;
  std::vector<Question> questions_;
  std::vector<pollfd> fds_;
  RefusalLog refusals_;
  bool fdLimitLogged_ = false;
  // Out of file descriptors, the listener stays readable: it is left out of the poll for a
  // moment instead of spinning (its guards wait in the backlog).
  std::optional<Clock::time_point> listenerPausedUntil_;
};

void PeerGate::Loop::run(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    fds_.clear();
    fds_.push_back({gate_.wake_.get(), POLLIN, 0});
    if (listenerPausedUntil_ && Clock::now() >= *listenerPausedUntil_) {
      listenerPausedUntil_.reset();
    }
    const short listenEvents = listenerPausedUntil_ ? 0 : POLLIN;
    fds_.push_back({gate_.listener_->fd(), listenEvents, 0});
    for (const auto& question : questions_) {
      fds_.push_back({question.fd.get(), POLLIN, 0});
    }
    const int ready = ::poll(fds_.data(), fds_.size(), pollTimeout(Clock::now(), nextDeadline()));
    if (ready < 0 && errno != EINTR) {
      log::error("peer gate: poll failed", {{"error", errnoText(errno)}});
    }
    const auto now = Clock::now();
    if (ready > 0) {
      if (fds_[0].revents != 0) {
        uint64_t count = 0;
        (void)!::read(gate_.wake_.get(), &count, sizeof(count));
        recheck(now);
      }
      // New questions go after the ones polled, so that the indices still match.
      const size_t polled = questions_.size();
      for (size_t i = 0; i < polled; ++i) {
        if (fds_[i + 2].revents != 0) {
          read(questions_[i], now);
        }
      }
      if (fds_[1].revents != 0) {
        acceptQuestions(now);
      }
    }
    expire(now);
    std::erase_if(questions_, [](const Question& question) { return question.done; });
    gate_.waiting_ = std::count_if(questions_.begin(), questions_.end(),
                                   [](const Question& question) { return question.waiting; });
  }
}

void PeerGate::Loop::acceptQuestions(Clock::time_point now) {
  for (;;) {
    UniqueFd fd(::accept4(gate_.listener_->fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) {
        continue;
      }
      if (errno == EMFILE || errno == ENFILE) {
        listenerPausedUntil_ = now + kFdLimitPause;
        if (!fdLimitLogged_) {
          fdLimitLogged_ = true;
          log::warn("peer gate: out of file descriptors; questions wait until some close",
                    {{"error", errnoText(errno)}});
        }
      }
      return;
    }
    Question question;
    question.fd = std::move(fd);
    question.deadline = now + gate_.options_.readTimeout;
    if (questions_.size() >= gate_.options_.maxQuestions) {
      question.peer.text = "(not read: too many questions open)";
      answer(question, false, "too many questions open at once", now);
      continue;
    }
    questions_.push_back(std::move(question));
  }
}

void PeerGate::Loop::read(Question& question, Clock::time_point now) {
  if (question.done) {
    return;
  }
  if (question.waiting) {
    // A guard sends nothing more after its question: it hung up, and refuses on its own.
    log::debug("peer gate: the guard stopped waiting", {{"peer", question.peer.text}});
    question.done = true;
    return;
  }
  const ssize_t got = ::recv(question.fd.get(), question.bytes.data() + question.received,
                             question.bytes.size() - question.received, MSG_DONTWAIT);
  if (got > 0) {
    question.received += static_cast<size_t>(got);
    if (question.received == question.bytes.size()) {
      decide(question, now);
    }
    return;
  }
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
    return;
  }
  question.done = true;  // hung up before asking
}

void PeerGate::Loop::decide(Question& question, Clock::time_point now) {
  auto peer = decodeQuestion(question.bytes);
  if (!peer) {
    question.peer.text = "(not a peer guard question)";
    answer(question, false, "not a peer guard question", now);
    return;
  }
  question.peer = std::move(*peer);
  if (gate_.refusingAll_) {
    answer(question, false, kDraining, now);
    return;
  }
  if (!question.peer.v4) {
    answer(question, false, "an IPv6 peer (gvirtus.io/peers lists IPv4 addresses)", now);
    return;
  }
  const Decision decision = gate_.policy_.ask(*question.peer.v4);
  switch (decision.verdict) {
    case Verdict::Allow:
      answer(question, true, "", now);
      return;
    case Verdict::Refuse:
      answer(question, false, decision.reason, now);
      return;
    case Verdict::Wait:
      question.waiting = true;
      question.deadline = now + gate_.options_.wait;
      ++gate_.waits_;
      log::debug("peer gate: waiting for the peer list to hold the address",
                 {{"peer", question.peer.text}});
      return;
  }
}

void PeerGate::Loop::recheck(Clock::time_point now) {
  const bool refusingAll = gate_.refusingAll_;
  for (auto& question : questions_) {
    if (question.waiting && !question.done &&
        (refusingAll || gate_.policy_.listed(*question.peer.v4))) {
      answer(question, !refusingAll, refusingAll ? kDraining : "", now);
    }
  }
}

void PeerGate::Loop::expire(Clock::time_point now) {
  for (auto& question : questions_) {
    if (question.done || question.deadline > now) {
      continue;
    }
    if (question.waiting) {
      answer(question, false, gate_.policy_.giveUp(*question.peer.v4).reason, now);
    } else {
      question.done = true;  // connected and sent no question in time
    }
  }
}

void PeerGate::Loop::answer(Question& question, bool allowed, const char* reason,
                            Clock::time_point now) {
  // Counted before it is sent: whoever got the answer finds it counted.
  ++(allowed ? gate_.allowed_ : gate_.refused_);
  gate_.refusedDraining_ += reason == kDraining ? 1 : 0;
  if (gate_.options_.onAnswer) {
    gate_.options_.onAnswer(allowed);
  }
  const uint8_t byte = allowed ? protocol::kAllowed : protocol::kRefused;
  (void)::send(question.fd.get(), &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  question.fd.reset();
  question.done = true;
  question.waiting = false;
  if (allowed) {
    log::debug("allowed a session", {{"peer", question.peer.text}});
    return;
  }
  if (reason == kDraining) {
    // refuseNewSessions() said it once: no warning per address.
    log::debug("refused a session", {{"peer", question.peer.text}, {"reason", reason}});
    return;
  }
  if (auto notLogged = refusals_.admit(question.peer.text, now)) {
    nlohmann::json fields = {{"peer", question.peer.text}, {"reason", reason}};
    if (*notLogged > 0) {
      fields["refusedSinceLastLine"] = *notLogged;
    }
    log::warn("refused a session", fields);
  }
}

std::optional<Clock::time_point> PeerGate::Loop::nextDeadline() const {
  std::optional<Clock::time_point> next = listenerPausedUntil_;
  for (const auto& question : questions_) {
    if (!next || question.deadline < *next) {
      next = question.deadline;
    }
  }
  return next;
}

PeerGate::PeerGate(PassKey, PeerGateOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<PeerGate>> PeerGate::start(PeerGateOptions options) {
  auto gate = std::make_unique<PeerGate>(PassKey{}, std::move(options));
  auto listener =
      PrivateUnixListener::open(gate->options_.parentDir, kFolderPrefix, kSocketName, kBacklog);
  if (!listener) {
    return fail(listener.error());
  }
  gate->listener_ = std::move(*listener);
  gate->wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!gate->wake_.valid()) {
    return fail("cannot make an eventfd: " + errnoText(errno));
  }
  PeerGate* self = gate.get();
  gate->thread_ = std::jthread([self](std::stop_token stop) { Loop(*self).run(stop); });
  return gate;
}

PeerGate::~PeerGate() {
  if (thread_.joinable()) {
    thread_.request_stop();
    wake();
    thread_.join();
  }
}

void PeerGate::setPeers(PeerList peers) {
  if (policy_.update(std::move(peers))) {
    wake();
  }
}

void PeerGate::refuseNewSessions() {
  if (refusingAll_.exchange(true)) {
    return;
  }
  log::info("draining: the peer check refuses every new session from now on; open sessions go on",
            {{"waitingQuestions", waiting_.load()}});
  wake();
}

void PeerGate::wake() {
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
}

}  // namespace gvirtus::backend_shim
