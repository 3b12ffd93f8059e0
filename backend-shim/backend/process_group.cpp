#include "backend-shim/backend/process_group.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "backend-shim/backend/proc_file.h"
#include "common/telemetry/log.h"

namespace gvirtus::backend_shim {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPollStep = std::chrono::milliseconds(20);
// After SIGKILL, how long to wait for the kernel (or whoever reaps the orphans).
constexpr auto kKillWait = std::chrono::seconds(5);

ExitStatus toExitStatus(int status) {
  ExitStatus exit;
  if (WIFEXITED(status)) {
    exit.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit.signal = WTERMSIG(status);
  }
  return exit;
}

// argv/envp arrays for posix_spawn, pointing into `strings`.
std::vector<char*> cStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) {
    out.push_back(const_cast<char*>(s.c_str()));
  }
  out.push_back(nullptr);
  return out;
}

struct SpawnAttributes {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnAttributes() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnAttributes() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
};

}  // namespace

std::string ExitStatus::describe() const {
  if (signal != 0) {
    const char* name = sigdescr_np(signal);
    return "killed by signal " + std::to_string(signal) +
           (name != nullptr ? std::string(" (") + name + ")" : std::string());
  }
  if (code < 0) {
    return "exited (its status was collected elsewhere)";
  }
  return "exit code " + std::to_string(code);
}

Result<ProcessGroup> ProcessGroup::start(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& env, ReapScope scope,
                                         ProcessOutput output, int passFd) {
  if (argv.empty()) {
    return fail("no command to start");
  }
  SpawnAttributes spawn;
  // Signals blocked or ignored here (the shim blocks SIGTERM and ignores SIGPIPE) would be
  // inherited through exec: reset them, so the backend dies of SIGTERM as GVirtuS does.
  sigset_t none;
  sigemptyset(&none);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigmask(&spawn.attr, &none);
  posix_spawnattr_setsigdefault(&spawn.attr, &all);
  posix_spawnattr_setpgroup(&spawn.attr, 0);
  posix_spawnattr_setflags(&spawn.attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawn_file_actions_addopen(&spawn.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // dup2 clears close-on-exec on the copy: the pipes' ends stay closed-on-exec here.
  if (output.stdoutFd >= 0) {
    posix_spawn_file_actions_adddup2(&spawn.actions, output.stdoutFd, STDOUT_FILENO);
  }
  if (output.stderrFd >= 0) {
    posix_spawn_file_actions_adddup2(&spawn.actions, output.stderrFd, STDERR_FILENO);
  }
  if (passFd >= 0) {
    posix_spawn_file_actions_adddup2(&spawn.actions, passFd, kPassedFd);
  }
  posix_spawn_file_actions_addclosefrom_np(&spawn.actions,
                                           passFd >= 0 ? kPassedFd + 1 : STDERR_FILENO + 1);

  auto args = cStrings(argv);
  auto envp = cStrings(env);
  pid_t pid = -1;
  const int rc =
      posix_spawn(&pid, argv[0].c_str(), &spawn.actions, &spawn.attr, args.data(), envp.data());
  if (rc != 0) {
    return fail("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  return ProcessGroup(pid, scope);
}

ProcessGroup::ProcessGroup(ProcessGroup&& other) noexcept
    : pid_(other.pid_), scope_(other.scope_), exit_(other.exit_), stopped_(other.stopped_) {
  other.pid_ = -1;
}

ProcessGroup& ProcessGroup::operator=(ProcessGroup&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0 && !stopped_) {
      ::kill(-pid_, SIGKILL);
      waitGone(Clock::now() + kKillWait);
    }
    pid_ = other.pid_;
    scope_ = other.scope_;
    exit_ = other.exit_;
    stopped_ = other.stopped_;
    other.pid_ = -1;
  }
  return *this;
}

ProcessGroup::~ProcessGroup() {
  if (pid_ > 0 && !stopped_) {
    ::kill(-pid_, SIGKILL);
    waitGone(Clock::now() + kKillWait);
  }
}

std::optional<ExitStatus> ProcessGroup::reap() {
  if (pid_ <= 0) {
    return std::nullopt;
  }
  std::optional<ExitStatus> collected;
  if (scope_ == ReapScope::AnyChild) {
    for (;;) {
      int status = 0;
      const pid_t done = ::waitpid(-1, &status, WNOHANG);
      if (done <= 0) {
        break;
      }
      if (done == pid_) {
        exit_ = toExitStatus(status);
        collected = exit_;
      } else {
        log::debug("reaped an orphaned child", {{"pid", done}});
      }
    }
  }
  if (!exit_) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exit_ = toExitStatus(status);
      collected = exit_;
    } else if (done < 0 && errno == ECHILD) {
      exit_ = ExitStatus{-1, 0};
      collected = exit_;
    }
  }
  return collected;
}

bool ProcessGroup::groupAlive() const {
  if (pid_ <= 0 || ::kill(-pid_, 0) != 0) {
    return false;
  }
  // kill() also reaches zombies: look for a member that still runs.
  for (const pid_t pid : listPids()) {
    const auto stat = readProcStat(pid);
    if (stat && stat->group == pid_ && stat->state != 'Z' && stat->state != 'X') {
      return true;
    }
  }
  return false;
}

Result<void> ProcessGroup::signal(int signal) const {
  if (pid_ <= 0) {
    return fail("no process group");
  }
  if (::kill(-pid_, signal) != 0 && errno != ESRCH) {
    return fail("cannot signal process group " + std::to_string(pid_) + ": " +
                std::strerror(errno));
  }
  return {};
}

bool ProcessGroup::waitGone(Clock::time_point deadline) {
  for (;;) {
    reap();
    if (!groupAlive() && exit_.has_value()) {
      return true;
    }
    if (Clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(kPollStep);
  }
}

std::optional<ExitStatus> ProcessGroup::stop(Duration grace) {
  if (pid_ <= 0 || stopped_) {
    return exit_;
  }
  reap();
  if (groupAlive()) {
    (void)signal(SIGTERM);
    (void)signal(SIGCONT);  // a stopped process acts on SIGTERM only once continued
    if (!waitGone(Clock::now() + grace)) {
      log::warn("the backend's process group outlived SIGTERM; sending SIGKILL",
                {{"pgid", pid_}, {"grace", formatDuration(grace)}});
      (void)signal(SIGKILL);
    }
  }
  if (!waitGone(Clock::now() + kKillWait)) {
    log::warn("the backend's process group is still there after SIGKILL", {{"pgid", pid_}});
  }
  stopped_ = true;
  return exit_;
}

int reapAnyChildren() {
  int count = 0;
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done <= 0) {
      return count;
    }
    log::debug("reaped an orphaned child", {{"pid", done}});
    ++count;
  }
}

Result<void> becomeChildSubreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    return fail(std::string("cannot become a child subreaper: ") + std::strerror(errno));
  }
  return {};
}

}  // namespace gvirtus::backend_shim
