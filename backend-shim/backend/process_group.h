#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/time/duration.h"

// A child process started in a process group of its own, so that it and every process it
// forks (GVirtuS's listening child) are signalled and stopped together.
namespace gvirtus::backend_shim {

struct ExitStatus {
  int code = 0;    // the exit code, when the process exited
  int signal = 0;  // the signal that ended it, 0 when it exited

  // "exit code 3" or "killed by signal 9 (Killed)".
  std::string describe() const;
};

// Whether reap() collects only the group's leader, or every exited child of this process.
// A shim that runs as PID 1 or as a child subreaper inherits the backend's orphans and must
// collect them all (waitpid(-1)); a test process that has other children must not.
enum class ReapScope { Leader, AnyChild };

// Where a child's stdout and stderr go: descriptors of this process (the write ends of the
// pipes BackendOutput reads), or -1 for this process's own.
struct ProcessOutput {
  int stdoutFd = -1;
  int stderrFd = -1;
};

class ProcessGroup {
 public:
  // Starts `argv` (argv[0] an executable path) with exactly `env` as its environment, in a
  // new process group it leads. Its stdin is /dev/null; stdout and stderr are `output`'s, by
  // default this process's; no other descriptor is inherited; signal mask and dispositions
  // are reset to the defaults. An error when it cannot run.
  // `passFd`, when not -1, is the one descriptor inherited: it becomes the child's
  // kPassedFd (a per-pod session process's handoff socket).
  static Result<ProcessGroup> start(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env,
                                    ReapScope scope = ReapScope::Leader, ProcessOutput output = {},
                                    int passFd = -1);
  static constexpr int kPassedFd = 3;

  ProcessGroup(ProcessGroup&& other) noexcept;
  ProcessGroup& operator=(ProcessGroup&& other) noexcept;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;
  // Kills the group at once (SIGKILL) and reaps the leader, unless stop() ran.
  ~ProcessGroup();

  // The leader's pid, which is also the group's id.
  pid_t pid() const { return pid_; }

  // Collects exited children without blocking (see ReapScope). Returns the leader's status
  // the first time it is collected.
  std::optional<ExitStatus> reap();
  bool leaderRunning() const { return !exit_.has_value(); }
  std::optional<ExitStatus> leaderExit() const { return exit_; }
  // True while a live process of the group exists. Zombies do not count: ours are reaped
  // here, and orphans' zombies are their reaper's business (a container's PID 1 may be
  // slow at it).
  bool groupAlive() const;

  // Sends `signal` to every process of the group.
  Result<void> signal(int signal) const;

  // SIGTERM (and SIGCONT) to the group; SIGKILL to what is left after `grace`; returns once
  // no live process of the group is left and the leader is reaped (or 5 s after SIGKILL, with
  // a warning). Returns the leader's exit status.
  std::optional<ExitStatus> stop(Duration grace);

 private:
  ProcessGroup(pid_t pid, ReapScope scope) : pid_(pid), scope_(scope) {}
  // Reaps and waits until the group is gone or `deadline` passes; true when gone.
  bool waitGone(std::chrono::steady_clock::time_point deadline);

  pid_t pid_ = -1;
  ReapScope scope_ = ReapScope::Leader;
  std::optional<ExitStatus> exit_;
  bool stopped_ = false;
};

// Collects every exited child of this process without blocking; returns how many. For a
// shim that is PID 1 or a subreaper, between backend runs.
int reapAnyChildren();

// Makes this process the reaper of its descendants' orphans (Linux PR_SET_CHILD_SUBREAPER),
// so that a backend's listening child whose parent died is still ours to stop and reap.
Result<void> becomeChildSubreaper();

}  // namespace gvirtus::backend_shim
