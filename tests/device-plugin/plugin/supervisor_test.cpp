#include "device-plugin/plugin/supervisor.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <thread>

#include "device-plugin/dp_test_support.h"
#include "support/cluster_env.h"

using namespace gvirtus::device_plugin;
using namespace std::chrono_literals;
using gvirtus::testing::eventually;
using test::callContext;
using test::FakeKubelet;
using test::pluginClient;
using test::TempDir;

namespace {

// A socket file nothing listens on, as a plugin that crashed leaves behind.
void leaveStaleSocket(const std::filesystem::path& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  ::close(fd);
}

bool answers(const std::filesystem::path& socket) {
  v1beta1::DevicePluginOptions options;
  return pluginClient(socket)
      ->GetDevicePluginOptions(callContext(2s).get(), v1beta1::Empty{}, &options)
      .ok();
}

struct Fixture {
  TempDir dir;
  DeviceList devices{2};
  PluginCounters counters;
  std::vector<bool> readiness;
  std::filesystem::path socket = dir.file("vgpu.sock");

  SupervisorConfig config() const {
    SupervisorConfig c;
    c.kubeletDir = dir.path();
    c.socketName = "vgpu.sock";
    c.resource = "example.com/vgpu";
    c.registerTimeout = 2s;
    return c;
  }
  std::unique_ptr<PluginSupervisor> supervisor() {
    return std::make_unique<PluginSupervisor>(config(), devices, counters,
                                              [this](bool ready) { readiness.push_back(ready); });
  }
};

}  // namespace

TEST_CASE("the supervisor replaces a stale socket, serves and registers",
          "[device-plugin][supervisor]") {
  Fixture f;
  leaveStaleSocket(f.socket);
  REQUIRE_FALSE(answers(f.socket));
  FakeKubelet kubelet(f.dir.path());
  auto supervisor = f.supervisor();
  supervisor->reconcile(false);

  CHECK(supervisor->serving());
  CHECK(supervisor->registered());
  CHECK(answers(f.socket));
  auto request = kubelet.awaitRequest(1);
  REQUIRE(request.has_value());
  CHECK(request->version() == "v1beta1");
  CHECK(request->endpoint() == "vgpu.sock");
  CHECK(request->resource_name() == "example.com/vgpu");
  CHECK_FALSE(request->options().pre_start_required());
  CHECK(request->options().get_preferred_allocation_available());
  CHECK(f.readiness == std::vector<bool>{true});
  CHECK(f.counters.registrations == 1);
  CHECK(f.counters.registered);

  // Nothing changed: nothing to do. A new mode on our socket is no new socket.
  supervisor->reconcile(false);
  supervisor->reconcile(true);
  std::filesystem::permissions(f.socket, std::filesystem::perms::owner_all);
  supervisor->reconcile(false);
  CHECK(supervisor->serving());
  CHECK(supervisor->registered());
  CHECK(kubelet.count() == 1);

  // Gone with the supervisor: our socket, not the kubelet's.
  supervisor.reset();
  CHECK_FALSE(std::filesystem::exists(f.socket));
  CHECK(std::filesystem::exists(f.dir.file("kubelet.sock")));
  CHECK(f.readiness == std::vector<bool>{true});
}

TEST_CASE("the supervisor serves before the kubelet is there, and registers once it is",
          "[device-plugin][supervisor]") {
  Fixture f;
  auto supervisor = f.supervisor();
  supervisor->reconcile(false);
  CHECK(supervisor->serving());
  CHECK_FALSE(supervisor->registered());
  CHECK(answers(f.socket));
  CHECK(supervisor->nextPassIn() == f.config().resyncInterval);

  FakeKubelet kubelet(f.dir.path());
  supervisor->reconcile(true);
  CHECK(supervisor->registered());
  CHECK(kubelet.count() == 1);
}

TEST_CASE("after a kubelet restart the supervisor serves and registers again",
          "[device-plugin][supervisor]") {
  Fixture f;
  auto kubelet = std::make_unique<FakeKubelet>(f.dir.path());
  auto supervisor = f.supervisor();
  supervisor->reconcile(false);
  REQUIRE(supervisor->registered());
  const auto before = identify(f.socket);

  // The kubelet stops, deletes every socket, and serves again.
  kubelet.reset();
  std::filesystem::remove(f.socket);
  supervisor->reconcile(false);
  CHECK_FALSE(supervisor->registered());
  CHECK(supervisor->serving());
  CHECK(identify(f.socket) != before);
  kubelet = std::make_unique<FakeKubelet>(f.dir.path());
  supervisor->reconcile(true);
  CHECK(supervisor->registered());
  CHECK(kubelet->count() == 1);
  CHECK(answers(f.socket));
  CHECK(f.readiness == std::vector<bool>{true, false, true});

  SECTION("kubelet.sock made again while our socket stays") {
    kubelet.reset();
    kubelet = std::make_unique<FakeKubelet>(f.dir.path());
    supervisor->reconcile(false);  // even without the event: kubelet.sock is another file
    CHECK(supervisor->registered());
    CHECK(kubelet->count() == 1);
  }
  SECTION("only our socket deleted") {
    std::filesystem::remove(f.socket);
    supervisor->reconcile(false);
    CHECK(supervisor->registered());
    CHECK(kubelet->count() == 2);
    CHECK(answers(f.socket));
  }
}

TEST_CASE("a failed registration is retried soon", "[device-plugin][supervisor]") {
  Fixture f;
  std::ofstream(f.dir.file("kubelet.sock")) << "not a socket";
  auto supervisor = f.supervisor();
  supervisor->reconcile(false);
  CHECK(supervisor->serving());
  CHECK_FALSE(supervisor->registered());
  CHECK(supervisor->nextPassIn() <= f.config().retryInitial * 2);
}

TEST_CASE("the supervisor steps back from a socket another process put under our name",
          "[device-plugin][supervisor]") {
  Fixture f;
  FakeKubelet kubelet(f.dir.path());
  auto supervisor = f.supervisor();
  supervisor->reconcile(false);
  REQUIRE(supervisor->registered());

  std::ofstream(f.dir.file("theirs")) << "";
  std::filesystem::rename(f.dir.file("theirs"), f.socket);
  supervisor->reconcile(false);
  CHECK_FALSE(supervisor->serving());
  CHECK_FALSE(supervisor->registered());
  CHECK(std::filesystem::exists(f.socket));  // theirs, untouched
  supervisor->reconcile(false);
  CHECK_FALSE(supervisor->serving());

  std::filesystem::remove(f.socket);
  supervisor->reconcile(false);
  CHECK(supervisor->serving());
  CHECK(supervisor->registered());
  CHECK(kubelet.count() == 2);
}

TEST_CASE("run() re-registers after a kubelet restart and cleans up when stopped",
          "[device-plugin][supervisor]") {
  Fixture f;
  auto kubelet = std::make_unique<FakeKubelet>(f.dir.path());
  PluginSupervisor supervisor(f.config(), f.devices, f.counters);
  std::stop_source stop;
  gvirtus::Result<void> ran;
  std::jthread loop([&] { ran = supervisor.run(stop.get_token()); });
  REQUIRE(kubelet->awaitRequest(1).has_value());

  kubelet.reset();
  std::filesystem::remove(f.socket);
  kubelet = std::make_unique<FakeKubelet>(f.dir.path());
  const auto restarted = std::chrono::steady_clock::now();
  REQUIRE(kubelet->awaitRequest(1, 5s).has_value());
  CHECK(std::chrono::steady_clock::now() - restarted < 5s);
  CHECK(eventually([&] { return answers(f.socket); }, 5s));

  stop.request_stop();
  loop.join();
  CHECK(ran.has_value());
  CHECK_FALSE(std::filesystem::exists(f.socket));
}
