#include "backend-shim/backend/listen_probe.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <memory>
#include <vector>

#include "backend-shim/shim_test_support.h"
#include "support/cluster_env.h"

using gvirtus::backend_shim::addProcNetTcp;
using gvirtus::backend_shim::describeSockets;
using gvirtus::backend_shim::ListenProbe;
using gvirtus::backend_shim::PortState;
namespace test = gvirtus::backend_shim::test;

namespace {

// Port 9999 is 270F. Line 1: the backend listening on every address. Lines 2-3: two
// clients' server-side sockets. Line 4: a client's own side (its local port is the
// ephemeral one). Line 5: TIME_WAIT. Line 6: another port listening.
const char* kTcp =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
    "timeout inode\n"
    "   0: 00000000:270F 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        "
    "0 31337 1 0000000000000000 100 0 0 10 0\n"
    "   1: 0100007F:270F 0100007F:D2A4 01 00000000:00000000 00:00000000 00000000     0        "
    "0 31338 1 0000000000000000 20 4 30 10 -1\n"
    "   2: 0A000105:270F 0A000203:8E12 01 00000000:00000000 00:00000000 00000000     0        "
    "0 31339 1 0000000000000000 20 4 30 10 -1\n"
    "   3: 0100007F:D2A4 0100007F:270F 01 00000000:00000000 00:00000000 00000000  1000        "
    "0 31340 1 0000000000000000 20 4 30 10 -1\n"
    "   4: 0100007F:270F 0100007F:C000 06 00000000:00000000 03:00001770 00000000     0        "
    "0 0 3 0000000000000000\n"
    "   5: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        "
    "0 31341 1 0000000000000000 100 0 0 10 0\n";

// IPv6: the backend on [::]:9999, one IPv4-mapped client, and CLOSE_WAIT (08).
const char* kTcp6 =
    "  sl  local_address                         remote_address                        st "
    "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 00000000000000000000000000000000:270F 00000000000000000000000000000000:0000 0A "
    "00000000:00000000 00:00000000 00000000     0        0 41000 1 0000000000000000 100 0 0 10 "
    "0\n"
    "   1: 0000000000000000FFFF00000100007F:270F 0000000000000000FFFF00000100007F:B000 01 "
    "00000000:00000000 00:00000000 00000000     0        0 41001 1 0000000000000000 20 4 30 10 "
    "-1\n"
    "   2: 0000000000000000FFFF00000100007F:270F 0000000000000000FFFF00000100007F:B001 08 "
    "00000000:00000000 00:00000000 00000000     0        0 41002 1 0000000000000000 20 4 30 10 "
    "-1\n";

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE(
    "backend-shim listen_probe: /proc/net/tcp sample: LISTEN and server-side ESTABLISHED only",
    "[listen_probe]") {
  PortState state;
  addProcNetTcp(kTcp, 9999, state);
  CHECK(state.listening);
  CHECK(state.established == 2);

  PortState other;
  addProcNetTcp(kTcp, 8080, other);
  CHECK(other.listening);
  CHECK(other.established == 0);

  PortState none;
  addProcNetTcp(kTcp, 9998, none);
  CHECK_FALSE(none.listening);
  CHECK(none.established == 0);
}

TEST_CASE("backend-shim listen_probe: /proc/net/tcp6 sample adds to the IPv4 numbers",
          "[listen_probe]") {
  PortState state;
  addProcNetTcp(kTcp6, 9999, state);
  CHECK(state.listening);
  CHECK(state.established == 1);
  CHECK(state.closeWait == 1);  // a finished client whose socket the backend kept
  addProcNetTcp(kTcp, 9999, state);
  CHECK(state.established == 3);
}

TEST_CASE("backend-shim listen_probe: the sockets on the port by state, as a log says them",
          "[listen_probe]") {
  PortState state;
  CHECK(describeSockets(state).empty());
  addProcNetTcp(kTcp, 9999, state);
  CHECK(state.byState[6] == 1);  // TIME_WAIT
  CHECK(describeSockets(state) == "ESTABLISHED=2 TIME_WAIT=1 LISTEN=1");
  addProcNetTcp(kTcp6, 9999, state);
  CHECK(describeSockets(state) == "ESTABLISHED=3 TIME_WAIT=1 CLOSE_WAIT=1 LISTEN=2");
}

TEST_CASE("backend-shim listen_probe: malformed lines are skipped", "[listen_probe]") {
  PortState state;
  addProcNetTcp(
      "garbage\n  0: nothing here\n  1: 0100007F:ZZZZ 0:0 0A\n\n   2: "
      "00000000:270F 00000000:0000 0A",
      9999, state);
  CHECK(state.listening);
  CHECK(state.established == 0);
}

TEST_CASE("backend-shim listen_probe: reads the injected files, a missing one is skipped",
          "[listen_probe]") {
  test::TempDir dir;
  writeFile(dir.file("tcp"), kTcp);
  writeFile(dir.file("tcp6"), kTcp6);
  ListenProbe both({dir.file("tcp"), dir.file("tcp6")});
  auto state = both.probe(9999);
  REQUIRE(state.has_value());
  CHECK(state->listening);
  CHECK(state->established == 3);

  ListenProbe oneMissing({dir.file("tcp"), dir.file("missing")});
  REQUIRE(oneMissing.probe(9999).has_value());
  CHECK(oneMissing.probe(9999)->established == 2);

  ListenProbe allMissing({dir.file("missing"), dir.file("missing6")});
  auto error = allMissing.probe(9999);
  REQUIRE_FALSE(error.has_value());
  CHECK_THAT(error.error().message, Catch::Contains("missing"));
}

TEST_CASE("backend-shim listen_probe: a real listener and real clients, counted without connecting",
          "[listen_probe]") {
  const int port = gvirtus::testing::freePort();
  const ListenProbe probe;
  auto before = probe.probe(static_cast<uint16_t>(port));
  REQUIRE(before.has_value());
  CHECK_FALSE(before->listening);

  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  REQUIRE(::listen(listener, 16) == 0);
  auto listening = probe.probe(static_cast<uint16_t>(port));
  REQUIRE(listening.has_value());
  CHECK(listening->listening);
  CHECK(listening->established == 0);

  {
    std::vector<std::unique_ptr<test::TcpClient>> clients;
    for (int i = 0; i < 3; ++i) {
      clients.push_back(std::make_unique<test::TcpClient>(port));
    }
    // Not accepted yet: the kernel's server-side sockets are ESTABLISHED all the same.
    auto connected = probe.probe(static_cast<uint16_t>(port));
    REQUIRE(connected.has_value());
    CHECK(connected->established == 3);
  }
  ::close(listener);
  auto closed = probe.probe(static_cast<uint16_t>(port));
  REQUIRE(closed.has_value());
  CHECK_FALSE(closed->listening);
  CHECK(closed->established == 0);
}
