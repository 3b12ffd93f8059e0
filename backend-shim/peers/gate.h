#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>

#include "backend-shim/peers/list.h"
#include "backend-shim/peers/policy.h"
#include "backend-shim/peers/private_unix_listener.h"
#include "common/base/error.h"
#include "common/base/unique_fd.h"
#include "common/time/duration.h"

// The shim's side of --peer-check: answers the peer guard preloaded into the backend
// (backend-shim/peer_guard) on a unix socket, one question per accepted TCP connection
// (peer_guard_protocol.h).
namespace gvirtus::backend_shim {

struct PeerGateOptions {
  // How long a question about an address not listed waits for a list that holds it.
  Duration wait = std::chrono::seconds(3);
  // Where the gate's private folder (mode 0700) is made; empty: $TMPDIR, else /tmp.
  std::string parentDir;
  // Questions open at once; more are refused at once (the guard then closes the connection).
  size_t maxQuestions = 1024;
  // A guard that connects and does not send its question within this is dropped.
  Duration readTimeout = std::chrono::seconds(1);
  // Told of every answer, on the gate's thread (the metrics).
  std::function<void(bool allowed)> onAnswer;
};

// One thread polls the socket and the open questions: a question that must wait for the list
// costs a slot, not a thread, and never delays the answers to others. Every refusal is logged
// (a warning, at most one line per address every ten seconds with the count left out).
class PeerGate {
 public:
  // Makes the private folder and the socket in it, and starts the thread.
  static Result<std::unique_ptr<PeerGate>> start(PeerGateOptions options);
  // Stops the thread (open questions are dropped: their guards refuse) and removes the
  // socket and its folder.
  ~PeerGate();
  PeerGate(const PeerGate&) = delete;
  PeerGate& operator=(const PeerGate&) = delete;

  // Only start() can name the key.
  class PassKey {
    friend class PeerGate;
    explicit PassKey() = default;
  };
  PeerGate(PassKey, PeerGateOptions options);

  const std::string& socketPath() const { return listener_->path(); }

  // Replaces the peer list; questions waiting for an address it holds are allowed at once.
  void setPeers(PeerList peers);
  // From now on every question is refused, listed address or not, and those waiting for the
  // list are refused at once: a draining backend takes no new session (sessions already
  // open are not the gate's: they go on). Logged once; idempotent.
  void refuseNewSessions();
  bool refusingNewSessions() const { return refusingAll_.load(); }

  // Addresses in the list; 0 before the first one.
  size_t peers() const { return policy_.peers(); }

  // Answers given since the start, and questions that had to wait for the list (counted
  // when their wait began): facts the tests wait for.
  int64_t allowed() const { return allowed_.load(); }
  int64_t refused() const { return refused_.load(); }
  int64_t waits() const { return waits_.load(); }
  // Of refused(): those refused because the backend drains.
  int64_t refusedDraining() const { return refusedDraining_.load(); }
  // Questions waiting for the list now.
  int64_t waiting() const { return waiting_.load(); }

 private:
  class Loop;

  void wake();

  PeerGateOptions options_;
  std::unique_ptr<PrivateUnixListener> listener_;
  UniqueFd wake_;  // an eventfd: a new list, or stop
  PeerPolicy policy_;
  std::atomic<int64_t> allowed_{0};
  std::atomic<int64_t> refused_{0};
  std::atomic<int64_t> waits_{0};
  std::atomic<int64_t> waiting_{0};
  std::atomic<int64_t> refusedDraining_{0};
  std::atomic<bool> refusingAll_{false};
  std::jthread thread_;  // last member: stopped first
};

}  // namespace gvirtus::backend_shim
