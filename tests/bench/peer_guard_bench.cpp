// What --peer-check costs the backend's clients: GVirtuS-shaped request/response round trips
// (a routine name, then an input buffer of 100-500 bytes, each length-prefixed; the reply a
// 4-byte status and a small buffer) against tests/backend-shim's echo server, three ways in
// the same run, each server its own process (LD_PRELOAD applies at exec):
//   direct       no guard
//   guard off    libgvirtus-peer-guard.so preloaded without its variables (the check off)
//   guard on     preloaded and asking a PeerGate in this process, as the shim's
// The guard only runs at accept: round trips on an open connection should cost the same
// three ways (goal: at most 5 us more at p50 with the guard on, nothing when off). A session
// (connect, first request, its reply) pays the gate's question once.
// The three ways alternate in rounds, each round starting with the next, so that the
// machine's load falls on all of them alike.
//
//   build/tests/peer_guard_bench
//   (BENCH_ROUND_TRIPS per way, default 20000; BENCH_SESSIONS per way, default 2000)

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend-shim/backend/config.h"
#include "backend-shim/peers/gate.h"
#include "bench/bench_env.h"
#include "bench/bench_output.h"
#include "bench/gvirtus_request.h"
#include "bench/percentile.h"
#include "common/base/unique_fd.h"
#include "support/child_process.h"
#include "support/cluster_env.h"
#include "support/temp_dir.h"

using namespace gvirtus::bench;
using namespace std::chrono_literals;
using gvirtus::UniqueFd;
using gvirtus::testing::ChildProcess;
using gvirtus::testing::eventually;
using gvirtus::testing::freePort;
namespace shim = gvirtus::backend_shim;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRounds = 20;

// One way of running the server, and what was measured of it.
struct Way {
  explicit Way(std::string wayName) : name(std::move(wayName)) {}
  std::string name;
  int port = freePort();
  std::unique_ptr<ChildProcess> server;
  std::vector<double> roundTrips;  // microseconds
  std::vector<double> sessions;    // microseconds
};

UniqueFd connectTo(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(fd.valid());
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // Closed with a reset: thousands of sessions leave no TIME_WAIT behind.
  const linger reset{1, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  return fd;
}

// Sends `text` and reads the reply: a 4-byte status, a size_t length and that many bytes.
bool roundTrip(int fd, const std::string& text) {
  if (::send(fd, text.data(), text.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(text.size())) {
    return false;
  }
  std::array<char, 4 + sizeof(uint64_t) + 64> reply{};
  if (::recv(fd, reply.data(), 12, MSG_WAITALL) != 12) {
    return false;
  }
  uint64_t size = 0;
  std::memcpy(&size, reply.data() + 4, sizeof(size));
  return size <= 64 && ::recv(fd, reply.data(), size, MSG_WAITALL) == static_cast<ssize_t>(size);
}

}  // namespace

TEST_CASE("peer guard: round trips and sessions, direct, guard off and guard on", "[bench]") {
  const int roundTrips = envInt("BENCH_ROUND_TRIPS", 20000);
  const int sessions = envInt("BENCH_SESSIONS", 2000);
  // A folder for the gate's private one and the servers' logs, removed at the end.
  gvirtus::testing::TempDir dir("gvirtus-peer-guard-bench");

  shim::PeerGateOptions gateOptions;
  gateOptions.parentDir = dir.path().string();
  auto gate = shim::PeerGate::start(std::move(gateOptions));
  REQUIRE(gate.has_value());
  (*gate)->setPeers(shim::PeerList({*shim::parseIpv4("127.0.0.1")}));

  std::array<Way, 3> ways{Way("direct"), Way("guard off"), Way("guard on")};
  const std::vector<std::string> preload{"LD_PRELOAD=" + std::string(PEER_GUARD_LIBRARY)};
  for (size_t i = 0; i < ways.size(); ++i) {
    Way& way = ways[i];
    std::vector<std::string> env;
    if (i == 1) {
      env = preload;
    } else if (i == 2) {
      env =
          shim::withPeerGuard({}, shim::PeerGuardSettings{PEER_GUARD_LIBRARY, (*gate)->socketPath(),
                                                          static_cast<uint16_t>(way.port), 5s});
    }
    way.server = std::make_unique<ChildProcess>(
        std::vector<std::string>{PEER_GUARD_ECHO_SERVER, "--gvirtus", "--quiet",
                                 std::to_string(way.port)},
        env, dir.file("server-" + std::to_string(i) + ".log"));
    REQUIRE(
        eventually([&] { return way.server->output().find("ready\n") != std::string::npos; }, 10s));
  }

  std::mt19937 random(42);
  std::vector<UniqueFd> open;
  for (auto& way : ways) {
    open.push_back(connectTo(way.port));
    for (int i = 0; i < 200; ++i) {  // warm up: caches, the scheduler's idea of the processes
      REQUIRE(roundTrip(open.back().get(), gvirtusRequest(random)));
    }
  }
  // Each round starts with another way: none is always the one right after the others.
  for (int round = 0; round < kRounds; ++round) {
    for (size_t k = 0; k < ways.size(); ++k) {
      const size_t i = (k + static_cast<size_t>(round)) % ways.size();
      for (int n = 0; n < roundTrips / kRounds; ++n) {
        const std::string text = gvirtusRequest(random);
        const auto start = Clock::now();
        REQUIRE(roundTrip(open[i].get(), text));
        ways[i].roundTrips.push_back(microseconds(Clock::now() - start));
      }
    }
  }
  open.clear();
  for (int round = 0; round < kRounds; ++round) {
    for (size_t k = 0; k < ways.size(); ++k) {
      Way& way = ways[(k + static_cast<size_t>(round)) % ways.size()];
      for (int n = 0; n < sessions / kRounds; ++n) {
        const std::string text = gvirtusRequest(random);
        const auto start = Clock::now();
        UniqueFd fd = connectTo(way.port);
        REQUIRE(roundTrip(fd.get(), text));
        way.sessions.push_back(microseconds(Clock::now() - start));
      }
    }
  }
  CHECK((*gate)->allowed() == sessions / kRounds * kRounds + 1);
  CHECK((*gate)->refused() == 0);

  const double directTrip = percentile(ways[0].roundTrips, 0.5);
  const double directSession = percentile(ways[0].sessions, 0.5);
  std::string table = format(
      "GVirtuS-shaped round trips on loopback (%zu per way, routine name + 100-500 byte input, "
      "4-byte status + up to 16 bytes back), and sessions (%zu per way: connect, one request, "
      "its reply), the three ways alternating in %d rounds:\n\n"
      "| way | round trip p50 | p99 | added p50 | session p50 | p99 | added p50 |\n"
      "|---|---|---|---|---|---|---|\n",
      ways[0].roundTrips.size(), ways[0].sessions.size(), kRounds);
  std::printf("\npeer guard: %zu round trips and %zu sessions per way (microseconds)\n",
              ways[0].roundTrips.size(), ways[0].sessions.size());
  std::printf("%-10s %14s %8s %10s %12s %8s %10s\n", "way", "round trip p50", "p99", "added",
              "session p50", "p99", "added");
  for (const auto& way : ways) {
    const double tripP50 = percentile(way.roundTrips, 0.5);
    const double tripP99 = percentile(way.roundTrips, 0.99);
    const double sessionP50 = percentile(way.sessions, 0.5);
    const double sessionP99 = percentile(way.sessions, 0.99);
    std::printf("%-10s %14.1f %8.1f %+10.1f %12.1f %8.1f %+10.1f\n", way.name.c_str(), tripP50,
                tripP99, tripP50 - directTrip, sessionP50, sessionP99, sessionP50 - directSession);
    table += format("| %s | %.1f us | %.1f us | %+.1f us | %.1f us | %.1f us | %+.1f us |\n",
                    way.name.c_str(), tripP50, tripP99, tripP50 - directTrip, sessionP50,
                    sessionP99, sessionP50 - directSession);
  }
  const double addedTrip = percentile(ways[2].roundTrips, 0.5) - directTrip;
  const double addedOffTrip = percentile(ways[1].roundTrips, 0.5) - directTrip;
  const double addedSession = percentile(ways[2].sessions, 0.5) - directSession;
  append("peer-guard.md", table + "\n");
  summaryRow("peer guard (--peer-check) added per round trip, p50: on / off",
             format("%+.1f us / %+.1f us", addedTrip, addedOffTrip), "6");
  summaryRow("peer guard added per session (connect + first reply), p50",
             format("%+.1f us (%.1f us direct)", addedSession, directSession), "6");
  // The goal: the guard costs a round trip nothing it can be told from (<= 5 us at p50).
  CHECK(addedTrip <= 5.0);
  CHECK(addedOffTrip <= 5.0);
}
