#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend-shim/backend/process_group.h"
#include "backend-shim/peers/list.h"
#include "common/base/error.h"
#include "common/base/unique_fd.h"

// One backend process of --sessions=per-pod: an unmodified gvirtus-backend, in a process
// group of its own, that serves the connections of one frontend pod and no other. The shim
// hands it each connection over a unix socket (the guard's handoff, peer_guard_protocol.h);
// the process announces itself on that socket when it first accepts.
namespace gvirtus::backend_shim {

class SessionProcess {
 public:
  // Starts `argv` with `env` plus the handoff variables (the socket as the child's
  // ProcessGroup::kPassedFd, `port` the one its bind is moved off).
  static Result<std::unique_ptr<SessionProcess>> start(const std::vector<std::string>& argv,
                                                       std::vector<std::string> env, uint16_t port,
                                                       ProcessOutput output);
  SessionProcess(const SessionProcess&) = delete;
  SessionProcess& operator=(const SessionProcess&) = delete;
  // Kills the group, if it still runs, and reaps its leader.
  ~SessionProcess() = default;

  // The shim's end of the handoff socket: readable when the process announces itself, hung
  // up when every process of the group has let it go.
  int control() const { return control_.get(); }
  // Descriptors readable once the process they watch has ended: the group's leader, and the
  // accepting process once announced (GVirtuS accepts in a forked child). -1 when none.
  int leaderExit() const { return leaderPidfd_.get(); }
  int serverExit() const { return serverPidfd_.get(); }
  pid_t pid() const { return group_.pid(); }

  // Reads the announcement; true once the process has announced itself. False and an
  // error when what came is not one, or the control socket is closed.
  Result<bool> readAnnouncement();
  bool ready() const { return serverPid_ != 0; }

  // Tells the process its pod's share of GPU memory, which its guard enforces from then on
  // (kLimits); before the pod's first connection is handed over.
  Result<void> limit(uint64_t gpuMemoryBytes);
  // Hands an accepted connection over (a copy of the descriptor: the caller keeps its own).
  Result<void> hand(int connection);

  // The pod this process serves (its address), once it serves one.
  std::optional<Ipv4> pod;
  int connections = 0;          // open connections of that pod
  uint64_t gpuMemoryShare = 0;  // the pod's share as last sent (limit()); 0: none
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  // SIGKILL to the whole group; the caller then waits for gone().
  void kill();
  // Reaps what can be reaped; true once no process of the group is left.
  bool gone();
  std::optional<ExitStatus> leaderStatus() const { return group_.leaderExit(); }

  class PassKey {
    friend class SessionProcess;
    explicit PassKey() = default;
  };
  SessionProcess(PassKey, ProcessGroup group, UniqueFd control, UniqueFd leaderPidfd);

 private:
  ProcessGroup group_;
  UniqueFd control_;
  UniqueFd leaderPidfd_;
  UniqueFd serverPidfd_;
  pid_t serverPid_ = 0;
};

// A descriptor that becomes readable when process `pid` ends (pidfd_open(2)).
Result<UniqueFd> openPidfd(pid_t pid);

}  // namespace gvirtus::backend_shim
