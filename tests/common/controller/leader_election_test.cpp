// Unit tests of leader election: MicroTime, the lease-expiry decision and the record
// transitions as pure logic, and the election loop against a tiny loopback fake of the
// Lease paths (support/fake_api_server.h). Two processes contending for a Lease on the real
// API server are exercised by the integration tests in tests/integration/.
#include "common/controller/leader_election.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/kube/client.h"
#include "support/cluster_env.h"
#include "support/fake_api_server.h"
#include "support/manual_clock.h"

namespace gvirtus {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using gvirtus::testing::eventually;
using SystemTime = std::chrono::system_clock::time_point;

SystemTime at(int64_t unixSeconds, int64_t micros = 0) {
  return SystemTime(std::chrono::seconds(unixSeconds)) + std::chrono::microseconds(micros);
}

LeaseRecord held(const std::string& holder, const std::string& renewTime, int64_t seconds = 15) {
  return {holder, seconds, "2026-11-22T10:00:00.000000Z", renewTime, 3};
}

TEST_CASE("MicroTime is UTC with six fractional digits", "[leader_election]") {
  // 2026-11-22T10:00:00Z
  const int64_t t = 1795341600;
  CHECK(formatMicroTime(at(t)) == "2026-11-22T10:00:00.000000Z");
  CHECK(formatMicroTime(at(t, 123456)) == "2026-11-22T10:00:00.123456Z");
  CHECK(formatMicroTime(at(0, 1)) == "1970-01-01T00:00:00.000001Z");
  CHECK(formatMilliTime(at(t, 123456)) == "2026-11-22T10:00:00.123Z");
  CHECK(formatMilliTime(at(0, 1)) == "1970-01-01T00:00:00.000Z");

  auto parsed = parseMicroTime("2026-11-22T10:00:00.123456Z");
  REQUIRE(parsed);
  CHECK(*parsed == at(t, 123456));
  CHECK(parseMicroTime("2026-11-22T10:00:00Z").value() == at(t));
  CHECK(parseMicroTime("2026-11-22T10:00:00.5Z").value() == at(t, 500000));
  CHECK(parseMicroTime(formatMicroTime(at(t, 42))).value() == at(t, 42));
  CHECK_FALSE(parseMicroTime(""));
  CHECK_FALSE(parseMicroTime("2026-11-22 10:00:00Z"));
  CHECK_FALSE(parseMicroTime("2026-11-22T10:00:00+01:00"));
  CHECK_FALSE(parseMicroTime("2026-11-22T10:00:00.Z"));
  CHECK_FALSE(parseMicroTime("2026-13-22T10:00:00Z"));
}

TEST_CASE("a Lease record round-trips through the Lease spec", "[leader_election]") {
  json lease = {{"metadata", {{"name", "l"}, {"resourceVersion", "7"}}},
                {"spec", {{"holderIdentity", "a"}, {"strategy", "OldestEmulationVersion"}}}};
  const LeaseRecord record{"b", 15, "2026-11-22T10:00:00.000000Z", "2026-11-22T10:00:02.000000Z",
                           4};
  record.applyTo(lease);
  CHECK(lease["spec"]["strategy"] == "OldestEmulationVersion");  // other fields kept
  CHECK(lease["metadata"]["resourceVersion"] == "7");
  CHECK(LeaseRecord::fromLease(lease) == record);
  CHECK(LeaseRecord::fromLease(json::object()) == LeaseRecord{});
}

TEST_CASE("expiry is judged by when we saw the record change and not by its renewTime",
          "[leader_election]") {
  using Clock = LeaseObservation::Clock;
  const Clock::time_point t0 = Clock::now();
  LeaseObservation observation;
  CHECK_FALSE(observation.heldByOther("me", t0));  // nothing seen: free

  // A renewTime years in the past (a skewed clock) still counts as fresh when we just saw it
  // change.
  observation.observe(held("other", "2001-01-01T00:00:00.000000Z"), t0);
  CHECK(observation.heldByOther("me", t0));
  CHECK(observation.heldByOther("me", t0 + 14s));
  CHECK_FALSE(observation.heldByOther("me", t0 + 15s));
  CHECK_FALSE(observation.heldByOther("other", t0 + 1s));  // our own lease is never "other's"

  SECTION("a holder that keeps renewing stays valid") {
    observation.observe(held("other", "2001-01-01T00:00:10.000000Z"), t0 + 10s);
    CHECK(observation.observedAt() == t0 + 10s);
    CHECK(observation.heldByOther("me", t0 + 24s));
    CHECK_FALSE(observation.heldByOther("me", t0 + 25s));
  }
  SECTION("seeing the same record again does not move the observation time") {
    observation.observe(held("other", "2001-01-01T00:00:00.000000Z"), t0 + 10s);
    CHECK(observation.observedAt() == t0);
    CHECK_FALSE(observation.heldByOther("me", t0 + 15s));
  }
  SECTION("a renewTime far in the future (a fast clock) does not extend the lease") {
    observation.observe(held("other", "2099-01-01T00:00:00.000000Z"), t0 + 1s);
    CHECK_FALSE(observation.heldByOther("me", t0 + 16s));
  }
  SECTION("a released lease (no holder) is free at once") {
    observation.observe(held("", "2026-11-22T10:00:00.000000Z", 1), t0 + 1s);
    CHECK_FALSE(observation.heldByOther("me", t0 + 1s));
  }
  SECTION("the holder's own leaseDurationSeconds counts") {
    observation.observe(held("other", "2026-11-22T10:00:00.000000Z", 60), t0 + 1s);
    CHECK(observation.heldByOther("me", t0 + 60s));
    CHECK_FALSE(observation.heldByOther("me", t0 + 61s));
  }
}

TEST_CASE("nextLeaseRecord creates renews and takes over", "[leader_election]") {
  const SystemTime now = at(1795341600, 250000);
  const std::string nowText = "2026-11-22T10:00:00.250000Z";

  const LeaseRecord created = nextLeaseRecord(std::nullopt, "me", 15s, now);
  CHECK(created == LeaseRecord{"me", 15, nowText, nowText, 0});

  const LeaseRecord mine{"me", 15, "2026-11-22T09:00:00.000000Z", "2026-11-22T09:59:58.000000Z", 5};
  const LeaseRecord renewed = nextLeaseRecord(mine, "me", 15s, now);
  CHECK(renewed == LeaseRecord{"me", 15, "2026-11-22T09:00:00.000000Z", nowText, 5});

  const LeaseRecord theirs{"them", 15, "2026-11-22T09:00:00.000000Z", "2026-11-22T09:59:00.000000Z",
                           5};
  const LeaseRecord taken = nextLeaseRecord(theirs, "me", 20s, now);
  CHECK(taken == LeaseRecord{"me", 20, nowText, nowText, 6});

  const LeaseRecord released{"", 1, "2026-11-22T09:59:59.000000Z", "2026-11-22T09:59:59.000000Z",
                             6};
  CHECK(nextLeaseRecord(released, "me", 15s, now).leaseTransitions == 7);
}

TEST_CASE("leader election timings are validated", "[leader_election]") {
  LeaderElectionConfig config;
  config.ns = "ns";
  config.name = "lease";
  config.identity = "me";
  CHECK(validate(config));
  auto bad = config;
  bad.identity = "";
  CHECK_FALSE(validate(bad));
  bad = config;
  bad.name = "";
  CHECK_FALSE(validate(bad));
  bad = config;
  bad.renewDeadline = 15s;
  CHECK_FALSE(validate(bad));
  bad = config;
  bad.retryPeriod = 9s;
  CHECK_FALSE(validate(bad));
  bad = config;
  bad.leaseDuration = 500ms;
  CHECK_FALSE(validate(bad));
  bad = config;
  bad.retryPeriod = 0ms;
  CHECK_FALSE(validate(bad));
}

std::unique_ptr<KubeClient> clientFor(const testing::FakeApiServer& server) {
  KubeClientOptions options;
  options.qps = 1000;
  options.burst = 1000;
  options.maxRetries = 0;
  options.requestTimeout = 1s;
  auto client = KubeClient::create(server.kubeConfig(), options);
  REQUIRE(client);
  return std::move(*client);
}

// Short timings so the tests take a second or two.
LeaderElectionConfig fastConfig(const std::string& identity) {
  LeaderElectionConfig config;
  config.ns = "gvirtus-system";
  config.name = "test-lease";
  config.identity = identity;
  config.leaseDuration = 2s;
  config.renewDeadline = 1500ms;
  config.retryPeriod = 100ms;
  return config;
}

// Counts the callbacks of one candidate.
struct Candidate {
  std::atomic<int> started = 0;
  std::atomic<int> stopped = 0;
  std::atomic<int> workEnded = 0;
  std::unique_ptr<LeaderElector> elector;

  Candidate(KubeClient& client, LeaderElectionConfig config) {
    config.onStartedLeading = [this](std::stop_token stop) {
      ++started;
      while (!stop.stop_requested()) {
        std::this_thread::sleep_for(5ms);
      }
      ++workEnded;
    };
    config.onStoppedLeading = [this] { ++stopped; };
    elector = std::make_unique<LeaderElector>(client, std::move(config));
  }
};

TEST_CASE("one of two candidates leads and when it stops the other takes over at once",
          "[leader_election]") {
  testing::FakeApiServer server;
  auto client = clientFor(server);
  Candidate a(*client, fastConfig("a"));
  Candidate b(*client, fastConfig("b"));
  REQUIRE(a.elector->start());
  REQUIRE(b.elector->start());
  REQUIRE(eventually([&] { return a.elector->isLeader() || b.elector->isLeader(); }));
  // For a while, exactly one leads and nobody flaps.
  for (int i = 0; i < 50; ++i) {
    CHECK(a.elector->isLeader() != b.elector->isLeader());
    std::this_thread::sleep_for(10ms);
  }
  Candidate& leader = a.elector->isLeader() ? a : b;
  Candidate& follower = a.elector->isLeader() ? b : a;
  const std::string leaderId = leader.elector->config().identity;
  const std::string followerId = follower.elector->config().identity;
  CHECK(leader.started == 1);
  CHECK(follower.started == 0);
  CHECK(follower.elector->leader() == leaderId);
  auto lease = server.lease("gvirtus-system", "test-lease");
  REQUIRE(lease);
  CHECK((*lease)["spec"]["holderIdentity"] == leaderId);
  CHECK((*lease)["spec"]["leaseDurationSeconds"] == 2);
  CHECK((*lease)["spec"]["leaseTransitions"] == 0);
  const std::string renew1 = (*lease)["spec"]["renewTime"];
  REQUIRE(eventually([&] {
    return server.lease("gvirtus-system", "test-lease").value()["spec"]["renewTime"] != renew1;
  }));

  // stop() ends the work, then releases the Lease: the follower need not wait 2s.
  leader.elector->stop();
  CHECK(leader.workEnded == 1);
  CHECK(leader.stopped == 1);
  CHECK_FALSE(leader.elector->isLeader());
  const auto released = std::chrono::steady_clock::now();
  REQUIRE(eventually([&] { return follower.elector->isLeader(); }, 3s));
  CHECK(std::chrono::steady_clock::now() - released < 1s);
  lease = server.lease("gvirtus-system", "test-lease");
  CHECK((*lease)["spec"]["holderIdentity"] == followerId);
  CHECK((*lease)["spec"]["leaseTransitions"] == 1);
  REQUIRE(eventually([&] { return follower.started == 1; }));
}

TEST_CASE("an expired Lease of a vanished holder is taken over after leaseDuration",
          "[leader_election]") {
  testing::FakeApiServer server;
  auto client = clientFor(server);
  const std::string now = formatMicroTime(std::chrono::system_clock::now());
  json ghost = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", "test-lease"}, {"namespace", "gvirtus-system"}}},
                {"spec",
                 {{"holderIdentity", "ghost"},
                  {"leaseDurationSeconds", 1},
                  {"acquireTime", now},
                  {"renewTime", now},
                  {"leaseTransitions", 2}}}};
  REQUIRE(client->create(resources::kLeases, "gvirtus-system", ghost));
  testing::ManualClock clock;
  LeaderElectionConfig config = fastConfig("a");
  config.clock = &clock;
  Candidate a(*client, config);
  const auto began = clock.now();
  REQUIRE(a.elector->start());
  // Every look but the last finds the ghost holding the Lease, and waits a retry period.
  Duration lastLookHeld{-1};
  for (size_t looks = 1; looks <= 100; ++looks) {
    REQUIRE(clock.waitForSleeps(looks));
    if (a.elector->isLeader()) {
      break;
    }
    CHECK(a.elector->leader() == "ghost");
    lastLookHeld = std::chrono::duration_cast<Duration>(clock.now() - began);
    clock.advance(clock.sleeps().back());
  }
  REQUIRE(a.elector->isLeader());
  // Taken at the first look once the ghost's 1s had passed since our first look at it
  // (our clock, not its renewTime), not before.
  CHECK(clock.now() - began >= 1s);
  CHECK(lastLookHeld >= 0ms);
  CHECK(lastLookHeld < 1s);
  auto lease = server.lease("gvirtus-system", "test-lease");
  CHECK((*lease)["spec"]["holderIdentity"] == "a");
  CHECK((*lease)["spec"]["leaseTransitions"] == 3);
}

TEST_CASE("leadership ends when renewing fails for renewDeadline and comes back",
          "[leader_election]") {
  testing::FakeApiServer server;
  auto client = clientFor(server);
  Candidate a(*client, fastConfig("a"));
  REQUIRE(a.elector->start());
  REQUIRE(eventually([&] { return a.elector->isLeader(); }));
  server.failLeases(true);
  const auto failing = std::chrono::steady_clock::now();
  REQUIRE(eventually([&] { return a.stopped == 1; }, 4s));
  const auto lost = std::chrono::steady_clock::now() - failing;
  CHECK(lost >= 1400ms);  // renewDeadline 1.5s from the last renewal (<= 100ms before)
  CHECK(lost < 2500ms);
  CHECK(a.workEnded == 1);
  CHECK_FALSE(a.elector->isLeader());

  server.failLeases(false);
  // The Lease still names "a": it renews and leads again, without a transition.
  REQUIRE(eventually([&] { return a.elector->isLeader(); }, 3s));
  REQUIRE(eventually([&] { return a.started == 2; }));
  CHECK(server.lease("gvirtus-system", "test-lease").value()["spec"]["leaseTransitions"] == 0);
}

TEST_CASE("stop() without leadership releases nothing", "[leader_election]") {
  testing::FakeApiServer server;
  auto client = clientFor(server);
  Candidate a(*client, fastConfig("a"));
  Candidate b(*client, fastConfig("b"));
  REQUIRE(a.elector->start());
  REQUIRE(eventually([&] { return a.elector->isLeader(); }));
  REQUIRE(b.elector->start());
  REQUIRE(eventually([&] { return b.elector->leader() == "a"; }));
  b.elector->stop();
  CHECK(server.lease("gvirtus-system", "test-lease").value()["spec"]["holderIdentity"] == "a");
  CHECK(a.elector->isLeader());
  CHECK(b.stopped == 0);
}

}  // namespace
}  // namespace gvirtus
