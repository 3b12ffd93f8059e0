// gvirtus-backend-shim with --sessions=per-pod, as a black box: the binary over the fake
// backend, clients from distinct loopback addresses standing for pods.
#include <signal.h>

#include <catch2/catch.hpp>
#include <string>

#include "backend-shim/backend/hidden_path.h"
#include "backend-shim/running_shim.h"
#include "support/temp_dir.h"

using namespace std::chrono_literals;
using gvirtus::testing::eventually;
namespace test = gvirtus::backend_shim::test;

namespace {

// One line of the stand-in's protocol over `client`: the serving process's answer line.
std::string ask(test::LoopbackClient& client, const std::string& line) {
  const size_t before = client.received().size();
  client.send(line + "\n");
  const std::string& got = client.receive(before + 2, 10s);
  const size_t end = got.find('\n', before);
  return end == std::string::npos ? "" : got.substr(before, end - before);
}

std::string servingPid(test::LoopbackClient& client) {
  return ask(client, "standin pid");
}

}  // namespace

TEST_CASE("backend-shim binary, per-pod: ready, a process per pod, drained on SIGTERM",
          "[shim_sessions]") {
  test::RunningShim shim;
  shim.start({"--sessions=per-pod", "--session-pool", "1", "--drain-timeout", "20s"});
  REQUIRE(eventually([&] { return shim.readyz() == 200; }, 15s));
  CHECK(eventually([&] { return shim.metric("gvirtus_backend_up 1"); }, 5s));

  auto podA = std::make_unique<test::LoopbackClient>(shim.port, "127.0.0.2");
  auto podB = std::make_unique<test::LoopbackClient>(shim.port, "127.0.0.3");
  const std::string pidA = servingPid(*podA);
  const std::string pidB = servingPid(*podB);
  REQUIRE(pidA.starts_with("pid "));
  REQUIRE(pidB.starts_with("pid "));
  CHECK(pidA != pidB);
  // The load and the metrics count pods: what --max-sessions bounds.
  CHECK(eventually([&] { return shim.metric("gvirtus_backend_connections 2"); }, 10s));

  shim.process->kill(SIGTERM);
  CHECK(eventually([&] { return shim.readyz() == 503; }, 2s));
  // Open sessions go on while the drain waits; a new pod is refused.
  CHECK(servingPid(*podA) == pidA);
  test::LoopbackClient late(shim.port, "127.0.0.4");
  late.send("standin pid\n");
  CHECK(late.closedWithin(10s));
  CHECK(late.received().empty());
  CHECK(shim.process->running());

  podA.reset();
  podB.reset();
  const auto code = shim.process->wait(15s);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK_THAT(shim.process->output(), Catch::Contains("no connection left"));
  CHECK_THAT(shim.process->output(), Catch::Contains("serving a pod in a process of its own"));
}

TEST_CASE("backend-shim binary, per-pod: the backend processes cannot read the hidden folder",
          "[shim_sessions]") {
  if (gvirtus::backend_shim::landlockAbi() == 0) {
    WARN("Landlock is not available on this kernel: the fence cannot be checked here");
    return;
  }
  gvirtus::testing::TempDir dir;
  std::filesystem::create_directories(dir.file("account/..data"));
  dir.write("account/..data/token", "secret");
  // As the kubelet lays a projected token out: a link into the current ..data.
  std::filesystem::create_symlink("..data/token", dir.file("account/token"));
  dir.write("open", "not secret");
  test::RunningShim shim;
  shim.start({"--sessions=per-pod", "--session-pool", "1", "--hide-from-backend",
              dir.file("account").string()});
  REQUIRE(eventually([&] { return shim.readyz() == 200; }, 15s));

  test::LoopbackClient pod(shim.port, "127.0.0.2");
  CHECK(ask(pod, "standin read " + dir.file("account/token").string()) ==
        "cannot read: Permission denied");
  CHECK(ask(pod, "standin read " + dir.file("account/..data/token").string()) ==
        "cannot read: Permission denied");
  CHECK(ask(pod, "standin read /proc/self/root" + dir.file("account/token").string()) ==
        "cannot read: Permission denied");
  // The rest of the machine reads as before.
  CHECK(ask(pod, "standin read " + dir.file("open").string()) == "read 10 bytes");
  CHECK(ask(pod, "standin read /etc/passwd").starts_with("read "));
  CHECK_THAT(shim.process->output(),
             Catch::Contains("the backend processes cannot read the hidden folder"));
}
