#include "backend-shim/leak_restart/gate.h"

#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "support/cluster_env.h"
#include "support/manual_clock.h"

using namespace gvirtus::backend_shim;
using namespace std::chrono_literals;
using gvirtus::testing::ManualClock;

namespace {

// The backend pods as the API server shows them: this one ("self") is Ready unless its gate
// drains (the kubelet's readiness probe, at once) or the test says otherwise.
struct Cluster {
  std::mutex mutex;
  std::map<std::string, bool> others;
  bool selfFollowsGate = true;
  LeakRestartGate* gate = nullptr;

  gvirtus::Result<std::vector<BackendPod>> list() {
    std::lock_guard lock(mutex);
    std::vector<BackendPod> pods{{"self", !selfFollowsGate || !gate->draining()}};
    for (const auto& [name, ready] : others) {
      pods.push_back({name, ready});
    }
    return pods;
  }
  void set(const std::string& name, bool ready) {
    std::lock_guard lock(mutex);
    others[name] = ready;
  }
};

// Looks every 1s, retries 30s + half (45s), settles up to 30s, then waits half of 4s (2s).
struct Fixture {
  ManualClock clock;
  Cluster cluster;
  std::unique_ptr<LeakRestartGate> gate;

  explicit Fixture(gvirtus::Duration maxDefer = 5min) {
    LeakRestartGateOptions options;
    options.self = "self";
    options.listBackends = [this] { return cluster.list(); };
    options.maxDefer = maxDefer;
    options.look = 1s;
    options.retry = 30s;
    options.settleTimeout = 30s;
    options.jitter = 4s;
    options.random = [] { return 0.5; };
    options.clock = &clock;
    gate = std::make_unique<LeakRestartGate>(std::move(options));
    cluster.gate = gate.get();
  }
  // Due now (more leaked than allowed, no client), and the gate's thread started.
  void due() {
    CHECK_FALSE(gate->permit(true, true));
    gate->start();
  }
  // Lets the gate's sleep number `n` (from 1) end, once it has asked for it.
  void pass(size_t n) {
    REQUIRE(clock.waitForSleeps(n));
    clock.advance(clock.sleeps()[n - 1]);
  }
};

}  // namespace

TEST_CASE("backend-shim leak_restart_gate: waits while no other backend is Ready, then goes",
          "[leak_restart]") {
  Fixture f;
  f.cluster.set("b", false);
  f.due();
  REQUIRE(f.clock.waitForSleeps(1));
  CHECK(f.clock.sleeps()[0] == 45s);  // deferred: looks again in 30s plus at most as much
  CHECK(f.gate->deferrals() == 1);
  CHECK_FALSE(f.gate->draining());
  CHECK_FALSE(f.gate->permit(true, true));

  f.cluster.set("b", true);
  f.pass(1);
  // Another is Ready: not ready now, until the API server shows it.
  REQUIRE(f.clock.waitForSleeps(2));
  CHECK(f.gate->draining());
  CHECK_FALSE(f.gate->permit(true, true));
  f.pass(2);  // this pod shows not Ready: a random moment more
  REQUIRE(f.clock.waitForSleeps(3));
  CHECK(f.clock.sleeps()[2] == 2s);
  f.pass(3);  // the last look finds b still Ready: granted
  REQUIRE(f.clock.waitForSleeps(4));
  CHECK(f.gate->permit(true, true));
  CHECK(f.gate->permits() == 1);
  CHECK(f.gate->deferrals() == 1);
  CHECK(f.gate->draining());  // not ready until the restart has begun
  CHECK_FALSE(f.gate->permit(false, false));
  CHECK_FALSE(f.gate->draining());
}

TEST_CASE("backend-shim leak_restart_gate: a client that connects while it drains keeps it",
          "[leak_restart]") {
  Fixture f;
  f.cluster.set("b", true);
  f.due();
  REQUIRE(f.clock.waitForSleeps(1));
  CHECK(f.gate->draining());
  CHECK_FALSE(f.gate->permit(true, false));  // a client: served, ready again
  CHECK_FALSE(f.gate->draining());
  f.pass(1);
  REQUIRE(f.clock.waitForSleeps(2));
  CHECK(f.clock.sleeps()[1] == 1s);  // back to looking for a due restart
  CHECK_FALSE(f.gate->draining());
  CHECK(f.gate->permits() == 0);
  CHECK(f.gate->deferrals() == 0);
}

TEST_CASE("backend-shim leak_restart_gate: the other going not Ready while it settles stops it",
          "[leak_restart]") {
  Fixture f;
  f.cluster.selfFollowsGate = false;
  f.cluster.set("b", true);
  f.due();
  REQUIRE(f.clock.waitForSleeps(1));
  CHECK(f.gate->draining());
  f.cluster.set("b", false);  // b drains too, or fails
  f.pass(1);
  REQUIRE(f.clock.waitForSleeps(2));
  CHECK(f.clock.sleeps()[1] == 45s);
  CHECK_FALSE(f.gate->draining());  // ready again at once
  CHECK(f.gate->deferrals() == 1);
  CHECK(f.gate->permits() == 0);
  CHECK_FALSE(f.gate->permit(true, true));
}

TEST_CASE("backend-shim leak_restart_gate: a pod never seen not Ready looks after the timeout",
          "[leak_restart]") {
  Fixture f;
  f.cluster.selfFollowsGate = false;
  f.cluster.set("b", true);
  f.due();
  for (size_t n = 1; n <= 30; ++n) {
    f.pass(n);  // 30 looks of 1s at this pod, still Ready
  }
  REQUIRE(f.clock.waitForSleeps(31));
  CHECK(f.clock.sleeps()[30] == 2s);
  CHECK(f.gate->permits() == 0);
  f.pass(31);
  REQUIRE(f.clock.waitForSleeps(32));
  CHECK(f.gate->permit(true, true));
}

TEST_CASE("backend-shim leak_restart_gate: alone, it goes after --leak-restart-max-defer",
          "[leak_restart]") {
  Fixture f(2min);
  f.due();
  f.pass(1);  // 45s
  f.pass(2);  // 90s
  REQUIRE(f.clock.waitForSleeps(3));
  CHECK(f.clock.sleeps()[2] == 30s);  // never past the bound
  CHECK(f.gate->deferrals() == 3);
  CHECK_FALSE(f.gate->permit(true, true));
  f.pass(3);
  REQUIRE(f.clock.waitForSleeps(4));
  CHECK(f.gate->permit(true, true));
  CHECK(f.gate->deferrals() == 3);
  CHECK_FALSE(f.gate->draining());
  // Over the limit again later: a new wait, from the start.
  CHECK_FALSE(f.gate->permit(false, false));
  CHECK_FALSE(f.gate->permit(true, true));
}

// Two backends over their limit at the same moment, each with its gate and a supervisor
// that asks it every millisecond, in real time with short waits; the API server shows a pod
// not Ready from the moment its gate drains or its backend restarts (a kubelet that is never
// late). Round after round, each restarts once, and never while the other restarts.
TEST_CASE("backend-shim leak_restart_gate: two backends due together never restart together",
          "[leak_restart]") {
  struct Backend {
    std::unique_ptr<LeakRestartGate> gate;
    bool due = true;
    std::optional<std::chrono::steady_clock::time_point> restartingUntil;
    int restarts = 0;
  };
  std::mutex mutex;  // the API server's view and both supervisors
  Backend backends[2];
  bool together = false;
  auto list = [&]() -> gvirtus::Result<std::vector<BackendPod>> {
    std::lock_guard lock(mutex);
    std::vector<BackendPod> pods;
    for (int i = 0; i < 2; ++i) {
      pods.push_back({"backend-" + std::to_string(i),
                      !backends[i].restartingUntil && !backends[i].gate->draining()});
    }
    return pods;
  };
  for (int i = 0; i < 2; ++i) {
    LeakRestartGateOptions options;
    options.self = "backend-" + std::to_string(i);
    options.listBackends = list;
    options.maxDefer = 1h;
    options.look = 1ms;
    options.retry = 10ms;
    options.settleTimeout = 1s;
    options.jitter = 5ms;
    backends[i].gate = std::make_unique<LeakRestartGate>(std::move(options));
  }
  auto supervise = [&](std::stop_token stop, int i) {
    Backend& self = backends[i];
    const Backend& other = backends[1 - i];
    while (!stop.stop_requested()) {
      {
        std::lock_guard lock(mutex);
        const auto now = std::chrono::steady_clock::now();
        if (self.restartingUntil && now >= *self.restartingUntil) {
          self.restartingUntil.reset();  // listening again, the leak gone
          self.due = false;
          ++self.restarts;
        }
        if (self.gate->permit(self.due && !self.restartingUntil, true)) {
          together = together || other.restartingUntil.has_value();
          self.restartingUntil = now + 5ms;
        }
      }
      std::this_thread::sleep_for(1ms);
    }
  };
  // Stopped before `backends` goes, even when a check fails: their threads read it.
  struct StopGates {
    Backend* backends;
    ~StopGates() {
      for (int i = 0; i < 2; ++i) {
        backends[i].gate->stop();
      }
    }
  } stopGates{backends};
  for (auto& backend : backends) {
    backend.gate->start();
  }
  std::jthread first(supervise, 0);
  std::jthread second(supervise, 1);
  for (int round = 1; round <= 10; ++round) {
    auto bothRestarted = [&] {
      std::lock_guard lock(mutex);
      return backends[0].restarts == round && backends[1].restarts == round;
    };
    REQUIRE(gvirtus::testing::eventually(bothRestarted, 20s));
    std::lock_guard lock(mutex);
    CHECK_FALSE(together);
    backends[0].due = backends[1].due = true;  // both over the limit again at once
  }
}
