// libgvirtus-peer-guard.so preloaded into a real listener (peer_guard_echo_server), asking a
// real gate in this process, with clients from distinct loopback addresses.
#include <catch2/catch.hpp>
#include <memory>

#include "backend-shim/backend/config.h"
#include "backend-shim/peer_guard_test_support.h"
#include "backend-shim/peers/gate.h"
#include "backend-shim/shim_test_support.h"
#include "support/child_process.h"
#include "support/cluster_env.h"

using namespace gvirtus::backend_shim;
using namespace std::chrono_literals;
using gvirtus::testing::ChildProcess;
using gvirtus::testing::eventually;
using gvirtus::testing::freePort;

namespace {

// The gate, and the echo server under the guard on `port` (checked) and `otherPort` (not).
struct GuardedEcho {
  test::TempDir dir;
  std::unique_ptr<PeerGate> gate;
  int port = freePort();
  int otherPort = freePort();
  std::unique_ptr<ChildProcess> server;

  explicit GuardedEcho(gvirtus::Duration wait, std::vector<std::string> serverFlags = {},
                       bool guardVariables = true) {
    PeerGateOptions options;
    options.wait = wait;
    options.parentDir = dir.path();
    auto started = PeerGate::start(std::move(options));
    REQUIRE(started.has_value());
    gate = std::move(*started);
    // A free port may be taken by an outgoing connection before the server binds it (it is
    // an ephemeral port): then the server says so, and it starts again on other ports.
    for (int attempt = 1;; ++attempt) {
      if (startServer(wait, serverFlags, guardVariables)) {
        return;
      }
      INFO(server->output());
      REQUIRE(logged("Address already in use"));
      REQUIRE(attempt < 5);
      port = freePort();
      otherPort = freePort();
    }
  }

  // True when it is ready; false when it exited first.
  bool startServer(gvirtus::Duration wait, const std::vector<std::string>& serverFlags,
                   bool guardVariables) {
    while (otherPort == port) {
      otherPort = freePort();
    }
    std::vector<std::string> argv{test::kEchoServer};
    argv.insert(argv.end(), serverFlags.begin(), serverFlags.end());
    argv.push_back(std::to_string(port));
    argv.push_back(std::to_string(otherPort));
    std::vector<std::string> env{"LD_PRELOAD=" + test::kPeerGuardLibrary};
    if (guardVariables) {
      env = withPeerGuard({}, PeerGuardSettings{test::kPeerGuardLibrary, gate->socketPath(),
                                                static_cast<uint16_t>(port), wait + 2s});
    }
    env.push_back(test::kAsanPreloadOrder);
    server = std::make_unique<ChildProcess>(argv, env, dir.file("echo.log"));
    const bool ready = eventually([&] { return logged("ready\n") || !server->running(); }, 10s);
    INFO(server->output());
    REQUIRE(ready);
    return server->running();
  }

  bool logged(const std::string& text) const {
    return server->output().find(text) != std::string::npos;
  }
  // Any question the gate has had, answered or waiting.
  int64_t questions() const { return gate->allowed() + gate->refused() + gate->waits(); }
};

PeerList peers(std::initializer_list<const char*> addresses) {
  std::vector<Ipv4> list;
  for (const char* address : addresses) {
    list.push_back(*parseIpv4(address));
  }
  return PeerList(std::move(list));
}

// Sends `text` and expects it back whole.
bool echoes(test::LoopbackClient& client, const std::string& text) {
  client.send(text);
  return client.receive(text.size(), 10s) == text;
}

// Sends `text` and expects the connection closed with nothing received.
bool closedUnread(test::LoopbackClient& client, const std::string& text) {
  client.send(text);
  return client.closedWithin(10s) && client.received().empty();
}

}  // namespace

TEST_CASE("peer guard: a listed address gets its echo", "[peer_guard]") {
  GuardedEcho echo(3s);
  echo.gate->setPeers(peers({"127.0.0.2"}));
  test::LoopbackClient client(echo.port, "127.0.0.2");
  CHECK(echoes(client, "hello"));
  CHECK(echo.gate->allowed() == 1);
  // The backend sees the peer's address, as accept() gives it.
  CHECK(echo.logged("accepted " + std::to_string(echo.port) + " 127.0.0.2\n"));
}

TEST_CASE("peer guard: an unlisted address is closed before any byte is echoed", "[peer_guard]") {
  GuardedEcho echo(200ms);
  echo.gate->setPeers(peers({"127.0.0.2"}));
  test::LoopbackClient stranger(echo.port, "127.0.0.3");
  CHECK(closedUnread(stranger, "let me in"));
  CHECK(echo.gate->refused() == 1);
  CHECK_FALSE(echo.logged("127.0.0.3"));  // the backend never saw it
  // Again: refused at once (no second wait), and the blocking accept has gone on to the
  // next connection, a listed one.
  test::LoopbackClient again(echo.port, "127.0.0.3");
  CHECK(closedUnread(again, "let me in"));
  test::LoopbackClient friendly(echo.port, "127.0.0.2");
  CHECK(echoes(friendly, "hello"));
  CHECK(echo.gate->waits() == 1);
  CHECK(echo.gate->refused() == 2);
}

TEST_CASE("peer guard: an address listed a moment after it connects is accepted", "[peer_guard]") {
  GuardedEcho echo(30s);
  echo.gate->setPeers(peers({"127.0.0.2"}));
  test::LoopbackClient early(echo.port, "127.0.0.4");
  early.send("early");
  REQUIRE(eventually([&] { return echo.gate->waiting() == 1; }, 10s));
  echo.gate->setPeers(peers({"127.0.0.2", "127.0.0.4"}));
  CHECK(early.receive(5, 10s) == "early");
  CHECK(echo.gate->allowed() == 1);
}

TEST_CASE("peer guard: before the first list, sessions wait and are refused", "[peer_guard]") {
  GuardedEcho echo(200ms);
  test::LoopbackClient first(echo.port, "127.0.0.2");
  CHECK(closedUnread(first, "hello"));
  echo.gate->setPeers(peers({"127.0.0.2"}));
  test::LoopbackClient second(echo.port, "127.0.0.2");
  CHECK(echoes(second, "hello"));
}

TEST_CASE("peer guard: with the gate gone every session is refused (fail closed)", "[peer_guard]") {
  GuardedEcho echo(3s);
  echo.gate->setPeers(peers({"127.0.0.2"}));
  echo.gate.reset();
  test::LoopbackClient client(echo.port, "127.0.0.2");
  CHECK(closedUnread(client, "hello"));
  CHECK(eventually([&] { return echo.logged("gvirtus-peer-guard: cannot reach the shim's gate"); },
                   5s));
}

TEST_CASE("peer guard: a listener on another port and a unix socket are untouched",
          "[peer_guard]") {
  test::TempDir unixDir;
  const std::string path = unixDir.file("echo.sock");
  GuardedEcho echo(3s, {"--unix", path});
  test::LoopbackClient client(echo.otherPort, "127.0.0.3");
  CHECK(echoes(client, "hello"));
  gvirtus::UniqueFd local(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
  REQUIRE(::connect(local.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  REQUIRE(::send(local.get(), "hi", 2, MSG_NOSIGNAL) == 2);
  char reply[2] = {};
  CHECK(::recv(local.get(), reply, 2, MSG_WAITALL) == 2);
  // Both were accepted and served: had the guard asked, the question would be counted.
  CHECK(echo.questions() == 0);
}

TEST_CASE("peer guard: a non-blocking accept of a refused connection says EAGAIN", "[peer_guard]") {
  GuardedEcho echo(0s, {"--nonblocking"});
  echo.gate->setPeers(peers({"127.0.0.2"}));
  test::LoopbackClient stranger(echo.port, "127.0.0.3");
  CHECK(closedUnread(stranger, "hello"));
  CHECK(eventually([&] { return echo.logged("would block " + std::to_string(echo.port)); }, 5s));
  test::LoopbackClient friendly(echo.port, "127.0.0.2");
  CHECK(echoes(friendly, "hello"));
  CHECK_FALSE(echo.logged("127.0.0.3"));
}

TEST_CASE("peer guard: an IPv4-mapped IPv6 peer counts as its IPv4 address", "[peer_guard]") {
  GuardedEcho echo(0s, {"--ipv6"});
  echo.gate->setPeers(peers({"127.0.0.2"}));
  test::LoopbackClient friendly(echo.port, "127.0.0.2");
  CHECK(echoes(friendly, "hello"));
  CHECK(echo.logged("accepted " + std::to_string(echo.port) + " ::ffff:127.0.0.2\n"));
  test::LoopbackClient stranger(echo.port, "127.0.0.3");
  CHECK(closedUnread(stranger, "hello"));
}

TEST_CASE("peer guard: preloaded without its variables it does nothing", "[peer_guard]") {
  GuardedEcho echo(3s, {}, false);
  test::LoopbackClient client(echo.port, "127.0.0.3");
  CHECK(echoes(client, "hello"));
  CHECK(echo.questions() == 0);
}
