#include "common/process/signals.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "support/eventually.h"

using gvirtus::ShutdownSignal;
using gvirtus::testing::eventually;
using namespace std::chrono_literals;

// install() changes the whole process (signal mask, SIGPIPE, a thread) and a stop request
// is final, so every case runs in a child: the test binary itself, started again with a
// hidden test case ("[.]" keeps them out of ordinary runs and of CTest).
namespace {

bool blockedHere(int signal) {
  sigset_t mask;
  sigemptyset(&mask);
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, signal) == 1;
}

// Runs this binary on `testName`; returns its exit status and output.
std::pair<int, std::string> runChild(const std::string& testName) {
  char outputPath[] = "/tmp/gvirtus-signals-test-XXXXXX";
  const int outputFd = mkstemp(outputPath);
  REQUIRE(outputFd >= 0);
  const std::string self = "/proc/self/exe";
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(outputFd, STDOUT_FILENO);
    dup2(outputFd, STDERR_FILENO);
    execl(self.c_str(), self.c_str(), testName.c_str(), "--warn", "NoTests",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(outputFd);
  int status = 0;
  if (!eventually([&] { return waitpid(pid, &status, WNOHANG) != 0; }, 20s, 10ms)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  std::ifstream file(outputPath);
  std::stringstream output;
  output << file.rdbuf();
  unlink(outputPath);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, output.str()};
}

// Bounded, so a broken implementation fails instead of hanging.
bool eventuallyStopped(const std::stop_token& token) {
  return eventually([&token] { return token.stop_requested(); }, 5s, 10ms);
}

}  // namespace

TEST_CASE("child: SIGTERM after install() stops", "[.][signals-child-sigterm]") {
  ShutdownSignal& shutdown = ShutdownSignal::install();
  CHECK(&ShutdownSignal::install() == &shutdown);  // idempotent

  CHECK(blockedHere(SIGTERM));
  CHECK(blockedHere(SIGINT));
  bool blockedInNewThread = false;
  std::thread([&] { blockedInNewThread = blockedHere(SIGTERM) && blockedHere(SIGINT); }).join();
  CHECK(blockedInNewThread);
  struct sigaction pipe {};
  sigaction(SIGPIPE, nullptr, &pipe);
  CHECK(pipe.sa_handler == SIG_IGN);

  const std::stop_token token = shutdown.token();
  std::atomic<bool> callbackRan{false};
  std::stop_callback callback(token, [&] { callbackRan = true; });
  CHECK_FALSE(token.stop_requested());
  CHECK(shutdown.signalNumber() == 0);
  CHECK(shutdown.signalsReceived() == 0);

  // raise() would target this thread only; a real SIGTERM (kubelet, kill) is for the process.
  REQUIRE(kill(getpid(), SIGTERM) == 0);
  REQUIRE(eventuallyStopped(token));
  shutdown.wait();
  CHECK(callbackRan);  // wait() returns after the stop callbacks ran
  CHECK(shutdown.signalNumber() == SIGTERM);
  CHECK(shutdown.signalsReceived() == 1);

  // Later signals and requests change nothing, and do not kill the process: once the
  // signal thread has taken the SIGINT, it is still the SIGTERM that asked.
  REQUIRE(kill(getpid(), SIGINT) == 0);
  shutdown.request();
  REQUIRE(eventually([&shutdown] { return shutdown.signalsReceived() == 2; }));
  CHECK(shutdown.signalNumber() == SIGTERM);
  shutdown.wait();
}

TEST_CASE("child: SIGINT after install() stops", "[.][signals-child-sigint]") {
  ShutdownSignal& shutdown = ShutdownSignal::install();
  REQUIRE(kill(getpid(), SIGINT) == 0);
  REQUIRE(eventuallyStopped(shutdown.token()));
  shutdown.wait();
  CHECK(shutdown.signalNumber() == SIGINT);
}

TEST_CASE("child: request() from another thread wakes wait()", "[.][signals-child-request]") {
  ShutdownSignal& shutdown = ShutdownSignal::install();
  std::jthread requester([&shutdown] {
    std::this_thread::sleep_for(50ms);
    shutdown.request();
  });
  shutdown.wait();
  CHECK(shutdown.token().stop_requested());
  CHECK(shutdown.signalNumber() == 0);

  // A signal after request() is not the one that asked for shutdown, once it was taken.
  REQUIRE(kill(getpid(), SIGTERM) == 0);
  REQUIRE(eventually([&shutdown] { return shutdown.signalsReceived() == 1; }));
  CHECK(shutdown.signalNumber() == 0);
}

TEST_CASE("ShutdownSignal turns SIGTERM and SIGINT into a stop request", "[signals]") {
  for (const char* child :
       {"[signals-child-sigterm]", "[signals-child-sigint]", "[signals-child-request]"}) {
    auto [code, output] = runChild(child);
    INFO(child << " said:\n" << output);
    CHECK(code == 0);
    CHECK_THAT(output, Catch::Contains("All tests passed"));
  }
}
