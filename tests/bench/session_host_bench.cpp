// What one process per pod (the shim's --sessions=per-pod) costs the backend's clients,
// against one shared process (--sessions=shared), in the same run. Both serve the fake
// backend of tests/backend-shim in echo mode (a thread per connection, as GVirtuS) with the
// peer check on:
//   shared    the backend accepts, the guard preloaded into it asks the gate per accept
//   per-pod   the shim's SessionHost accepts, asks the gate, and hands the connection to
//             the pod's own process, from a pool of 2
// Three figures, the two ways alternating in rounds:
//   - round trip on an open session (GVirtuS-shaped request of 100-500 bytes, echoed):
//     goal, per-pod within 1 us of shared at p50 (no byte passes through the shim);
//   - a new pod's session setup (connect, first request, its answer), the pool refilled
//     before each: goal, per-pod within 2 ms of shared at p50;
//   - a listed pod's setup while 50 unlisted addresses have just connected (--peer-wait
//     200ms): goal, p99 under 10 ms. Shared, the backend's accept loop waits on each.
//
//   build/tests/session_host_bench
//   (BENCH_ROUND_TRIPS per way, default 10000; BENCH_SESSIONS per way, default 200;
//    BENCH_FLOOD_TRIALS, default 3)

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend-shim/backend/config.h"
#include "backend-shim/peers/gate.h"
#include "backend-shim/sessions/host.h"
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
constexpr int kRounds = 10;
constexpr int kFlood = 50;
constexpr auto kPeerWait = 200ms;

UniqueFd connectFrom(const std::string& source, int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(fd.valid());
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const linger reset{1, 0};  // closed with a reset: no TIME_WAIT left behind
  ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  REQUIRE(::inet_pton(AF_INET, source.c_str(), &from.sin_addr) == 1);
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof(from)) == 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0);
  return fd;
}

// Sends `text`, reads it back whole.
bool roundTrip(int fd, const std::string& text) {
  if (::send(fd, text.data(), text.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(text.size())) {
    return false;
  }
  std::string back(text.size(), '\0');
  return ::recv(fd, back.data(), back.size(), MSG_WAITALL) == static_cast<ssize_t>(back.size());
}

struct Way {
  explicit Way(std::string wayName) : name(std::move(wayName)) {}
  std::string name;
  int port = freePort();
  std::vector<double> roundTrips, setups, flooded;  // microseconds
};

}  // namespace

TEST_CASE("sessions: one process per pod against one shared process", "[bench]") {
  const int roundTrips = envInt("BENCH_ROUND_TRIPS", 10000);
  const int sessions = envInt("BENCH_SESSIONS", 200);
  const int floodTrials = envInt("BENCH_FLOOD_TRIALS", 3);
  gvirtus::testing::TempDir dir("gvirtus-session-bench");

  shim::PeerGateOptions gateOptions;
  gateOptions.parentDir = dir.path().string();
  gateOptions.wait = kPeerWait;
  auto gate = shim::PeerGate::start(std::move(gateOptions));
  REQUIRE(gate.has_value());
  (*gate)->setPeers(shim::PeerList({*shim::parseIpv4("127.0.0.2"), *shim::parseIpv4("127.0.0.3")}));

  Way shared("shared");
  Way perPod("per-pod");
  // Shared: the fake backend itself on its port, the guard asking the gate.
  const std::string sharedConfig = dir.file("shared.json");
  REQUIRE(
      shim::writeBackendConfig(
          sharedConfig, shim::renderBackendConfig(static_cast<uint16_t>(shared.port), {"cudart"}))
          .has_value());
  ChildProcess sharedBackend(
      {FAKE_GVIRTUS_BACKEND, "--echo", sharedConfig},
      shim::withPeerGuard(
          {}, shim::PeerGuardSettings{PEER_GUARD_LIBRARY, (*gate)->socketPath(),
                                      static_cast<uint16_t>(shared.port), kPeerWait + 2s}),
      dir.file("shared.log"));
  REQUIRE(eventually([&] { return sharedBackend.output().find("listening") != std::string::npos; },
                     10s));
  // Per-pod: the host over the same backend.
  const std::string perPodConfig = dir.file("per-pod.json");
  REQUIRE(
      shim::writeBackendConfig(
          perPodConfig, shim::renderBackendConfig(static_cast<uint16_t>(perPod.port), {"cudart"}))
          .has_value());
  shim::SessionHostOptions hostOptions;
  hostOptions.port = static_cast<uint16_t>(perPod.port);
  hostOptions.argv = {FAKE_GVIRTUS_BACKEND, "--echo", perPodConfig};
  hostOptions.env = shim::withPreload({}, PEER_GUARD_LIBRARY);
  hostOptions.gateSocket = (*gate)->socketPath();
  hostOptions.gateTimeout = kPeerWait + 2s;
  auto host = shim::SessionHost::start(std::move(hostOptions));
  REQUIRE(host.has_value());
  auto poolFull = [&] { return (*host)->status().idle == 2 && (*host)->status().ready; };
  REQUIRE(eventually(poolFull, 10s));

  std::mt19937 random(42);
  std::array<Way*, 2> ways{&shared, &perPod};
  // 1) Round trips on an open session each.
  {
    std::array<UniqueFd, 2> open{connectFrom("127.0.0.2", shared.port),
                                 connectFrom("127.0.0.2", perPod.port)};
    for (size_t i = 0; i < 2; ++i) {
      for (int n = 0; n < 200; ++n) {
        REQUIRE(roundTrip(open[i].get(), gvirtusRequest(random)));
      }
    }
    for (int round = 0; round < kRounds; ++round) {
      for (size_t k = 0; k < 2; ++k) {
        const size_t i = (k + static_cast<size_t>(round)) % 2;
        for (int n = 0; n < roundTrips / kRounds; ++n) {
          const std::string text = gvirtusRequest(random);
          const auto start = Clock::now();
          REQUIRE(roundTrip(open[i].get(), text));
          ways[i]->roundTrips.push_back(microseconds(Clock::now() - start));
        }
      }
    }
  }
  // 2) A new pod's session: the per-pod pool full again before each (a fact, waited for).
  for (int round = 0; round < kRounds; ++round) {
    for (size_t k = 0; k < 2; ++k) {
      const size_t i = (k + static_cast<size_t>(round)) % 2;
      for (int n = 0; n < sessions / kRounds; ++n) {
        REQUIRE(eventually(poolFull, 10s));
        REQUIRE(eventually([&] { return (*host)->status().pods == 0; }, 10s));
        const std::string text = gvirtusRequest(random);
        const auto start = Clock::now();
        UniqueFd fd = connectFrom("127.0.0.3", ways[i]->port);
        REQUIRE(roundTrip(fd.get(), text));
        ways[i]->setups.push_back(microseconds(Clock::now() - start));
      }
    }
  }
  // 3) A listed pod right behind 50 unlisted addresses (new ones each trial).
  for (int trial = 0; trial < floodTrials; ++trial) {
    for (Way* way : ways) {
      REQUIRE(eventually(poolFull, 10s));
      std::vector<UniqueFd> strangers;
      for (int s = 0; s < kFlood; ++s) {
        strangers.push_back(
            connectFrom("127.0." + std::to_string(10 + trial * 2 + (way == &perPod ? 1 : 0)) + "." +
                            std::to_string(s + 1),
                        way->port));
      }
      const std::string text = gvirtusRequest(random);
      const auto start = Clock::now();
      UniqueFd fd = connectFrom("127.0.0.2", way->port);
      REQUIRE(roundTrip(fd.get(), text));
      way->flooded.push_back(microseconds(Clock::now() - start));
    }
  }

  const double sharedTrip = percentile(shared.roundTrips, 0.5);
  const double sharedSetup = percentile(shared.setups, 0.5);
  std::string table = format(
      "Echoed GVirtuS-shaped requests (%zu per way), new pods' sessions (%zu per way: connect, "
      "one request, its answer) and a listed pod behind %d unlisted addresses (%d per way, "
      "--peer-wait %lldms), the two ways alternating:\n\n"
      "| way | round trip p50 | p99 | setup p50 | p99 | behind %d unlisted, worst |\n"
      "|---|---|---|---|---|---|\n",
      shared.roundTrips.size(), shared.setups.size(), kFlood, floodTrials,
      static_cast<long long>(kPeerWait.count()), kFlood);
  std::printf("\nsessions: shared process against a process per pod (microseconds)\n");
  std::printf("%-8s %14s %8s %10s %8s %18s\n", "way", "round trip p50", "p99", "setup p50", "p99",
              "behind unlisted");
  for (const Way* way : ways) {
    const double worst = *std::max_element(way->flooded.begin(), way->flooded.end());
    std::printf("%-8s %14.1f %8.1f %10.1f %8.1f %18.1f\n", way->name.c_str(),
                percentile(way->roundTrips, 0.5), percentile(way->roundTrips, 0.99),
                percentile(way->setups, 0.5), percentile(way->setups, 0.99), worst);
    table += format("| %s | %.1f us | %.1f us | %.1f us | %.1f us | %.1f ms |\n", way->name.c_str(),
                    percentile(way->roundTrips, 0.5), percentile(way->roundTrips, 0.99),
                    percentile(way->setups, 0.5), percentile(way->setups, 0.99), worst / 1000);
  }
  const double addedTrip = percentile(perPod.roundTrips, 0.5) - sharedTrip;
  const double addedSetup = percentile(perPod.setups, 0.5) - sharedSetup;
  const double flooded = *std::max_element(perPod.flooded.begin(), perPod.flooded.end());
  table += format(
      "\nGoals: round trip within 1 us of shared at p50 (%+.1f us: %s); setup within 2 ms "
      "(%+.2f ms: %s); behind unlisted addresses under 10 ms (%.1f ms: %s).\n",
      addedTrip, addedTrip <= 1.0 ? "met" : "missed", addedSetup / 1000,
      addedSetup <= 2000 ? "met" : "missed", flooded / 1000, flooded < 10000 ? "met" : "missed");
  std::printf("%s", table.substr(table.find("\nGoals")).c_str());
  append("session-host.md", table + "\n");
  summaryRow("one process per pod: round trip added, p50",
             format("%+.1f us (%.1f us shared)", addedTrip, sharedTrip), "6");
  summaryRow("one process per pod: new pod's setup added, p50",
             format("%+.2f ms (%.2f ms shared)", addedSetup / 1000, sharedSetup / 1000), "6");
  summaryRow("listed pod behind 50 unlisted, worst: per-pod / shared",
             format("%.1f ms / %.1f ms", flooded / 1000,
                    *std::max_element(shared.flooded.begin(), shared.flooded.end()) / 1000),
             "6");
}
