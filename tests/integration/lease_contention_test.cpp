// Two processes contend for a Lease on the real API server: exactly one leads; when it is
// killed (SIGKILL, no release) the other takes over once the lease expires; a clean stop
// (SIGTERM) releases the Lease so that the other takes over at once.
#include <signal.h>

#include "common/controller/leader_election.h"
#include "integration/fixtures.h"
#include "support/child_process.h"

namespace gvirtus::integration {
namespace {

using testing::ChildProcess;

// The contenders' timings: short, so that the test takes seconds, in client-go's ratios.
constexpr auto kLeaseDuration = 4s;
constexpr auto kRetryPeriod = 500ms;

std::vector<std::string> contenderArgs(const std::string& ns, const std::string& lease,
                                       const std::string& identity) {
  return {GVIRTUS_LEASE_CONTENDER,
          "--kubeconfig",
          kubeconfigPath(),
          "--namespace",
          ns,
          "--name",
          lease,
          "--identity",
          identity,
          "--lease-duration",
          "4s",
          "--renew-deadline",
          "3s",
          "--retry-period",
          "500ms"};
}

bool leads(ChildProcess& child, const std::string& identity) {
  return hasLine(child.output(), "LEADING " + identity);
}

// `child` has read the Lease and found `leader` holding it.
bool follows(ChildProcess& child, const std::string& identity, const std::string& leader) {
  return hasLine(child.output(), "FOLLOWS " + identity + " " + leader);
}

std::string outputs(ChildProcess& a, ChildProcess& b) {
  return "contender-a:\n" + a.output() + "\ncontender-b:\n" + b.output();
}

TEST_CASE("two processes contend for a Lease and the survivor takes over after SIGKILL",
          "[integration][lease]") {
  auto client = adminClient();
  TestNamespace ns(*client, "it-lease");
  const std::string lease = "it-lease-" + randomSuffix();

  ChildProcess a(contenderArgs(ns.name(), lease, "contender-a"));
  ChildProcess b(contenderArgs(ns.name(), lease, "contender-b"));
  if (!eventually([&] { return leads(a, "contender-a") || leads(b, "contender-b"); }, 30s)) {
    FAIL("nobody leads\n" << outputs(a, b));
  }
  const bool aLeads = leads(a, "contender-a");
  ChildProcess& leader = aLeads ? a : b;
  ChildProcess& follower = aLeads ? b : a;
  const std::string leaderId = aLeads ? "contender-a" : "contender-b";
  const std::string followerId = aLeads ? "contender-b" : "contender-a";
  // The other has read the Lease, seen it held, and not taken it.
  if (!eventually([&] { return follows(follower, followerId, leaderId); }, 30s)) {
    FAIL("the other does not follow\n" << outputs(a, b));
  }
  INFO(outputs(a, b));
  REQUIRE(aLeads != leads(b, "contender-b"));

  auto held = client->get(resources::kLeases, ns.name(), lease);
  REQUIRE(held);
  const LeaseRecord first = LeaseRecord::fromLease(*held);
  CHECK(first.holderIdentity == leaderId);
  CHECK(first.leaseDurationSeconds == 4);
  CHECK(first.leaseTransitions == 0);
  CHECK(parseMicroTime(first.renewTime).has_value());
  CHECK(first.renewTime.size() == std::string("2026-11-22T10:00:00.000000Z").size());

  // A crash: no release, so the follower must wait for the lease to expire.
  const auto killed = std::chrono::steady_clock::now();
  leader.kill(SIGKILL);
  REQUIRE(leader.wait(5s).has_value());
  if (!eventually([&] { return leads(follower, followerId); }, 20s)) {
    FAIL("no takeover\n" << outputs(a, b));
  }
  const auto tookOver = std::chrono::steady_clock::now() - killed;
  WARN("takeover after SIGKILL of the leader: "
       << std::chrono::duration_cast<std::chrono::milliseconds>(tookOver).count() << " ms");
  // Not before the lease could have expired (the last renewal was at most a retry period
  // before the kill), and within the lease duration plus two retry periods: one for the
  // follower to see the last renewal, one for its next attempt (client-go's bound too).
  CHECK(tookOver >= kLeaseDuration - kRetryPeriod - 200ms);
  CHECK(tookOver <= kLeaseDuration + 2 * kRetryPeriod + 1s);

  held = client->get(resources::kLeases, ns.name(), lease);
  REQUIRE(held);
  const LeaseRecord second = LeaseRecord::fromLease(*held);
  CHECK(second.holderIdentity == followerId);
  CHECK(second.leaseTransitions == 1);
  CHECK(second.acquireTime != first.acquireTime);

  // A clean stop releases the Lease: no holder, a one-second duration.
  follower.kill(SIGTERM);
  const auto code = follower.wait(10s);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK(hasLine(follower.output(), "EXITING " + followerId));
  held = client->get(resources::kLeases, ns.name(), lease);
  REQUIRE(held);
  const LeaseRecord released = LeaseRecord::fromLease(*held);
  CHECK(released.holderIdentity.empty());
  CHECK(released.leaseDurationSeconds == 1);
  CHECK(released.leaseTransitions == 1);
}

TEST_CASE("a released Lease is taken over at once", "[integration][lease]") {
  auto client = adminClient();
  TestNamespace ns(*client, "it-lease");
  const std::string lease = "it-lease-" + randomSuffix();
  ChildProcess a(contenderArgs(ns.name(), lease, "contender-a"));
  if (!eventually([&] { return leads(a, "contender-a"); }, 30s)) {
    FAIL("contender-a does not lead:\n" << a.output());
  }
  ChildProcess b(contenderArgs(ns.name(), lease, "contender-b"));
  if (!eventually([&] { return follows(b, "contender-b", "contender-a"); }, 30s)) {
    FAIL("contender-b does not follow:\n" << outputs(a, b));
  }
  REQUIRE_FALSE(leads(b, "contender-b"));

  const auto stopped = std::chrono::steady_clock::now();
  a.kill(SIGTERM);
  if (!eventually([&] { return leads(b, "contender-b"); }, 10s)) {
    FAIL("no takeover\n" << outputs(a, b));
  }
  const auto tookOver = std::chrono::steady_clock::now() - stopped;
  WARN("takeover after a clean stop of the leader: "
       << std::chrono::duration_cast<std::chrono::milliseconds>(tookOver).count() << " ms");
  // About one retry period (plus jitter), not the 4s lease duration.
  CHECK(tookOver < 2s);
  REQUIRE(a.wait(10s).has_value());
  CHECK(hasLine(a.output(), "STOPPED contender-a"));
  CHECK(hasLine(a.output(), "EXITING contender-a"));
}

}  // namespace
}  // namespace gvirtus::integration
