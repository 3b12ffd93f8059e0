#pragma once

#include <netinet/in.h>
#include <poll.h>

#include <chrono>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "backend-shim/peers/list.h"
#include "backend-shim/peers/refusal_log.h"
#include "backend-shim/sessions/host.h"
#include "backend-shim/sessions/process.h"
#include "common/base/unique_fd.h"
#include "common/time/backoff.h"

// SessionHost's thread, private to host.cpp and its two halves: loop.cpp
// (the loop, the pool and the processes' lives) and admission.cpp (a connection
// from accept to its process, or to its refusal).
namespace gvirtus::backend_shim {

using SessionClock = std::chrono::steady_clock;

// A connection whose address the gate is being asked about.
struct PendingSession {
  UniqueFd connection;
  UniqueFd question;
  Ipv4 peer = 0;
  SessionClock::time_point deadline;
};

// An open connection: the shim's copy, watched for the frontend's hang-up.
struct OpenSession {
  UniqueFd connection;
  SessionProcess* process = nullptr;
  bool ended = false;  // the frontend hung up; endSessions() closes it
};

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
  void fillPool(SessionClock::time_point now);
  SessionProcess* startProcess(SessionClock::time_point now);
  void acceptConnections(SessionClock::time_point now);
  void admit(UniqueFd connection, const sockaddr_in& peer, SessionClock::time_point now);
  void dispatch(UniqueFd connection, Ipv4 peer, SessionClock::time_point now);
  void refuse(UniqueFd connection, Ipv4 peer, const char* kind, const std::string& reason,
              SessionClock::time_point now);
  void readAnswers(const std::vector<pollfd>& fds, size_t first, SessionClock::time_point now);
  void watchProcesses(SessionClock::time_point now);
  void refreshShares(SessionClock::time_point now);
  void endSessions();
  void retire(SessionProcess* process);
  void lose(SessionProcess* process, const std::string& why, SessionClock::time_point now);
  std::optional<SessionClock::time_point> nextDeadline() const;
  SessionHostStatus status() const;

  SessionHost& host_;
  const SessionHostOptions& options_;
  Backoff backoff_;
  std::optional<SessionClock::time_point> nextStart_;  // a start waits for its backoff
  // A pool refill waits this long after a pod took a process while another one still waits:
  // the new session's first calls run before a start competes with them for the CPU.
  std::optional<SessionClock::time_point> refillAt_;
  std::vector<std::unique_ptr<SessionProcess>> processes_;
  std::vector<std::unique_ptr<SessionProcess>> dying_;
  std::vector<PendingSession> pending_;
  std::vector<OpenSession> sessions_;
  RefusalLog refusals_;
  int64_t starts_ = 0;
  int64_t lost_ = 0;
  int64_t refused_ = 0;
  std::optional<SessionClock::time_point> listenerPausedUntil_;
  // When the served pods' GPU memory shares are looked at again: a share the webhook writes
  // or changes after a pod's first connection reaches its process within a second.
  SessionClock::time_point sharesDue_{};
};

}  // namespace gvirtus::backend_shim
