#include "backend-shim/backend/process_group.h"

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <thread>

#include "backend-shim/backend/config.h"
#include "backend-shim/backend/listen_probe.h"
#include "backend-shim/shim_test_support.h"
#include "support/cluster_env.h"

using namespace gvirtus::backend_shim;
using namespace std::chrono_literals;
using gvirtus::testing::eventually;
using gvirtus::testing::freePort;

namespace {

std::vector<std::string> fakeArgv(std::vector<std::string> options, const std::string& config) {
  options.insert(options.begin(), test::kFakeBackend);
  options.push_back(config);
  return options;
}

bool listening(int port) {
  auto state = ListenProbe().probe(static_cast<uint16_t>(port));
  return state && state->listening;
}

}  // namespace

TEST_CASE("backend-shim process_group: the backend and its forked child are stopped together",
          "[process_group]") {
  test::TempDir dir;
  const int port = freePort();
  const auto config = test::writeConfig(dir, port);
  auto group = ProcessGroup::start(fakeArgv({}, config), currentEnvironment());
  REQUIRE(group.has_value());
  CHECK(::getpgid(group->pid()) == group->pid());
  REQUIRE(eventually([&] { return listening(port); }, 10s));
  CHECK(group->leaderRunning());
  CHECK(group->groupAlive());
  const auto children = test::childrenOf(group->pid(), false);
  REQUIRE(children.size() == 1);  // the listening child

  const auto started = std::chrono::steady_clock::now();
  auto status = group->stop(5s);
  CHECK(std::chrono::steady_clock::now() - started < 3s);  // SIGTERM was enough
  REQUIRE(status.has_value());
  CHECK(status->signal == SIGTERM);
  CHECK_FALSE(group->groupAlive());
  CHECK_FALSE(test::processAlive(children[0]));
  CHECK_FALSE(listening(port));
  CHECK(test::childrenOf(::getpid(), true).empty());  // no zombie left
}

TEST_CASE("backend-shim process_group: SIGKILL after the grace when SIGTERM is ignored",
          "[process_group]") {
  test::TempDir dir;
  const int port = freePort();
  const auto config = test::writeConfig(dir, port);
  auto group = ProcessGroup::start(fakeArgv({"--ignore-sigterm"}, config), currentEnvironment());
  REQUIRE(group.has_value());
  REQUIRE(eventually([&] { return listening(port); }, 10s));
  const auto started = std::chrono::steady_clock::now();
  auto status = group->stop(700ms);
  const auto took = std::chrono::steady_clock::now() - started;
  CHECK(took >= 700ms);
  CHECK(took < 4s);
  REQUIRE(status.has_value());
  CHECK(status->signal == SIGKILL);
  CHECK(status->describe() == "killed by signal 9 (Killed)");
  CHECK_FALSE(group->groupAlive());
  CHECK_FALSE(listening(port));
}

TEST_CASE("backend-shim process_group: the exit of the leader is reaped once", "[process_group]") {
  auto group = ProcessGroup::start({"/bin/sh", "-c", "exit 7"}, currentEnvironment());
  REQUIRE(group.has_value());
  std::optional<ExitStatus> exited;
  REQUIRE(eventually([&] { return (exited = group->reap()).has_value(); }, 10s));
  CHECK(exited->code == 7);
  CHECK(exited->describe() == "exit code 7");
  CHECK_FALSE(group->leaderRunning());
  CHECK_FALSE(group->reap().has_value());  // reported once
  CHECK(test::childrenOf(::getpid(), true).empty());
}

TEST_CASE("backend-shim process_group: environment, stdin and inherited descriptors",
          "[process_group]") {
  test::TempDir dir;
  const std::string out = dir.file("out.txt");
  // Descriptors above stderr are closed in the child; stdin reads as empty.
  const int leaked = ::open("/dev/null", O_RDONLY);  // not O_CLOEXEC on purpose
  REQUIRE(leaked > 2);
  const std::string script = "echo \"ld=$LD_LIBRARY_PATH home=$GVIRTUS_HOME\" > " + out +
                             "; if [ -e /proc/self/fd/" + std::to_string(leaked) +
                             " ]; then echo leaked >> " + out + "; fi; cat >> " + out;
  auto group = ProcessGroup::start({"/bin/sh", "-c", script},
                                   backendEnvironment({"PATH=/usr/bin:/bin"}, "/opt/g"));
  ::close(leaked);
  REQUIRE(group.has_value());
  REQUIRE(eventually([&] { return group->reap().has_value(); }, 10s));
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "ld=/opt/g/lib home=/opt/g\n");
}

TEST_CASE(
    "backend-shim process_group: SIGTERM blocked and SIGPIPE ignored here are reset for the "
    "backend",
    "[process_group]") {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &term, &previous);
  auto group = ProcessGroup::start({"/bin/sleep", "30"}, currentEnvironment());
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  REQUIRE(group.has_value());
  auto status = group->stop(5s);
  REQUIRE(status.has_value());
  CHECK(status->signal == SIGTERM);
}

TEST_CASE("backend-shim process_group: a command that cannot run is an error", "[process_group]") {
  auto group = ProcessGroup::start({"/no/such/backend", "x.json"}, currentEnvironment());
  REQUIRE_FALSE(group.has_value());
  CHECK_THAT(group.error().message, Catch::Contains("/no/such/backend"));
  CHECK_FALSE(ProcessGroup::start({}, {}).has_value());
}

TEST_CASE(
    "backend-shim process_group: as a subreaper, orphans of a dead leader are stopped and reaped",
    "[process_group]") {
  test::SubreaperScope subreaper;
  test::TempDir dir;
  const int port = freePort();
  const auto config = test::writeConfig(dir, port);
  // The parent exits at once; its listening child is reparented to this process.
  auto group = ProcessGroup::start(fakeArgv({"--exit-after", "0.3"}, config), currentEnvironment(),
                                   ReapScope::AnyChild);
  REQUIRE(group.has_value());
  std::optional<ExitStatus> exited;
  REQUIRE(eventually([&] { return (exited = group->reap()).has_value(); }, 10s));
  CHECK(exited->code == 3);
  CHECK(group->groupAlive());  // the orphan still listens
  CHECK(listening(port));
  const auto orphans = test::childrenOf(::getpid(), false);
  REQUIRE(orphans.size() == 1);
  group->stop(5s);
  CHECK_FALSE(group->groupAlive());
  CHECK_FALSE(listening(port));
  CHECK(test::childrenOf(::getpid(), false).empty());
}

TEST_CASE("backend-shim process_group: the destructor kills and reaps what is left",
          "[process_group]") {
  pid_t pid = 0;
  {
    auto group = ProcessGroup::start({"/bin/sleep", "30"}, currentEnvironment());
    REQUIRE(group.has_value());
    pid = group->pid();
    CHECK(test::processAlive(pid));
  }
  CHECK_FALSE(test::processAlive(pid));
  CHECK(test::childrenOf(::getpid(), false).empty());
}
