#pragma once

// A child process for tests: started with fork/exec, output to a log file, killed and
// reaped when the object goes away (RAII), so a failing test leaves nothing behind.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/eventually.h"

namespace gvirtus::testing {

class ChildProcess {
 public:
  // argv[0] is a path. `env` entries "K=V" are added to (or override) the environment.
  ChildProcess(std::vector<std::string> argv, std::vector<std::string> env = {},
               std::string logPath = {})
      : logPath_(logPath.empty() ? tempLogPath() : std::move(logPath)) {
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open(logPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
      }
      setpgid(0, 0);  // its own group, so kill() reaches its children too
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      for (const auto& entry : env) {
        const auto eq = entry.find('=');
        setenv(entry.substr(0, eq).c_str(), entry.substr(eq + 1).c_str(), 1);
      }
      std::vector<char*> args;
      for (auto& a : argv) {
        args.push_back(a.data());
      }
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~ChildProcess() {
    if (running()) {
      kill(SIGKILL);
      wait(std::chrono::seconds(5));
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running() { return pid_ > 0 && !status_ && !reap(WNOHANG); }
  void kill(int sig) {
    if (pid_ > 0 && !status_) {
      ::kill(-pid_, sig);
    }
  }
  // The exit code (or 128+signal), or nullopt if still running after `timeout`.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    eventually([this] { return status_ || reap(WNOHANG); }, timeout, std::chrono::milliseconds(20));
    return status_;
  }
  std::string output() const {
    std::ifstream in(logPath_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  const std::string& logPath() const { return logPath_; }

 private:
  bool reap(int flags) {
    int status = 0;
    if (waitpid(pid_, &status, flags) != pid_) {
      return false;
    }
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
  }
  static std::string tempLogPath() {
    std::string pattern = "/tmp/gvirtus-test-XXXXXX.log";
    const int fd = mkstemps(pattern.data(), 4);
    if (fd >= 0) {
      close(fd);
    }
    return pattern;
  }

  std::string logPath_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// Runs a command to completion; returns {exit code, combined output}.
inline std::pair<int, std::string> runCommand(
    std::vector<std::string> argv, std::vector<std::string> env = {},
    std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  ChildProcess child(std::move(argv), std::move(env));
  auto code = child.wait(timeout);
  if (!code) {
    child.kill(SIGKILL);
    child.wait(std::chrono::seconds(5));
    return {-1, child.output() + "\n(timed out)"};
  }
  return {*code, child.output()};
}

}  // namespace gvirtus::testing
