// The CPU a release pass spends per pod, without a cluster: 10,000 waiting pods and the
// backends of make bench-scale's release (200 full, 40 with room for all of them), the
// webhook's own chooser and release patches, and a writer that answers at once. make
// bench-scale measured the leader at about 10 ms of CPU per released pod on a saturated
// machine; this says which part of that the pass itself (choosing a backend, building the
// patch) is, and the rest is the leader's caches, its HTTP writes and its Events.
// CPU from /proc, which a busy machine does not inflate as it does wall time.
//
//   build/tests/release_pass_bench   (BENCH_WAITING, default 10000)

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_env.h"
#include "bench/bench_output.h"
#include "bench/process_stats.h"
#include "webhook/fixtures.h"
#include "webhook/release_fixtures.h"

using namespace gvirtus;
using namespace gvirtus::bench;
using namespace gvirtus::webhook;
using namespace gvirtus::webhook::release_testing;

namespace {

std::string ipOf(int i) {
  return "10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1);
}

}  // namespace

TEST_CASE("release pass: CPU per pod with 10,000 waiting and 240 backends", "[bench]") {
  const int waiting = envInt("BENCH_WAITING", 10000);
  constexpr int kFull = 200;
  constexpr int kRoomy = 40;
  const int maxSessions = waiting / kRoomy + waiting / kRoomy / 10 + 1;
  std::vector<Backend> backends;
  for (int b = 0; b < kFull + kRoomy; ++b) {
    backends.push_back(gvirtus::webhook::testing::backend(
        ipOf(b), b < kFull ? maxSessions : 0, maxSessions, "backend-" + std::to_string(b)));
  }
  std::vector<json> pods;
  for (int i = 0; i < waiting; ++i) {
    pods.push_back(waitingPod("wait-" + std::to_string(i), "2026-11-28T01:00:00Z"));
  }
  const auto snapshots = snapshotsOf(pods);

  BackendChooser chooser;
  const double cpu0 = cpuSeconds(::getpid());
  const auto wall0 = std::chrono::steady_clock::now();
  const auto outcomes = releaseWaitingPods(
      snapshots, backends, chooser, {},
      [](const json&, const JsonPatch&) -> Result<void> { return {}; }, {}, {}, 8);
  const double cpu = cpuSeconds(::getpid()) - cpu0;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  size_t released = 0;
  for (const auto& outcome : outcomes) {
    released += outcome.kind == PodOutcome::Kind::Released ? 1 : 0;
  }
  CHECK(released == static_cast<size_t>(waiting));

  const std::string page = format(
      "One release pass of %d waiting pods over %d backends (%d full, %d with room for all), "
      "writes answered at once (tests/bench/release_pass_bench.cpp).\n\n"
      "| | |\n|---|---|\n"
      "| pods released | %zu |\n"
      "| CPU per pod: choosing a backend and building the release patch | %.0f us |\n"
      "| wall time of the pass | %.2f s |\n",
      waiting, kFull + kRoomy, kFull, kRoomy, released, cpu * 1e6 / waiting, wall);
  std::printf("\n%s\n", page.c_str());
  append("release_pass.md", page);
}
