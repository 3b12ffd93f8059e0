#include "backend-shim/peers/policy.h"

#include <catch2/catch.hpp>

using namespace gvirtus::backend_shim;

namespace {

Ipv4 ip(const char* text) {
  return *parseIpv4(text);
}

}  // namespace

TEST_CASE("peer policy: listed addresses are allowed, others wait for the list", "[peer_policy]") {
  PeerPolicy policy;
  CHECK_FALSE(policy.hasList());
  // Before the first list, everything waits (and is then refused: fail closed).
  CHECK(policy.ask(ip("10.0.0.1")).verdict == Verdict::Wait);
  CHECK(policy.update(PeerList({ip("10.0.0.1")})));
  CHECK(policy.hasList());
  CHECK(policy.peers() == 1);
  CHECK(policy.ask(ip("10.0.0.1")).verdict == Verdict::Allow);
  CHECK(policy.ask(ip("10.0.0.2")).verdict == Verdict::Wait);
  CHECK_FALSE(policy.listed(ip("10.0.0.2")));
  CHECK(policy.update(PeerList({ip("10.0.0.1"), ip("10.0.0.2")})));
  CHECK(policy.listed(ip("10.0.0.2")));
}

TEST_CASE("peer policy: a refused address is refused at once until the list changes",
          "[peer_policy]") {
  PeerPolicy policy;
  policy.update(PeerList({ip("10.0.0.1")}));
  const Decision first = policy.giveUp(ip("10.0.0.9"));
  CHECK(first.verdict == Verdict::Refuse);
  CHECK_THAT(first.reason, Catch::Contains("within --peer-wait"));
  const Decision again = policy.ask(ip("10.0.0.9"));
  CHECK(again.verdict == Verdict::Refuse);
  CHECK_THAT(again.reason, Catch::Contains("refused before"));
  // Others are not affected.
  CHECK(policy.ask(ip("10.0.0.8")).verdict == Verdict::Wait);
  CHECK(policy.ask(ip("10.0.0.1")).verdict == Verdict::Allow);

  // The same list again is no change: still refused at once.
  CHECK_FALSE(policy.update(PeerList({ip("10.0.0.1")})));
  CHECK(policy.ask(ip("10.0.0.9")).verdict == Verdict::Refuse);
  // A change gives it another wait, and a list that holds it lets it in.
  CHECK(policy.update(PeerList({ip("10.0.0.1"), ip("10.0.0.3")})));
  CHECK(policy.ask(ip("10.0.0.9")).verdict == Verdict::Wait);
  policy.giveUp(ip("10.0.0.9"));
  CHECK(policy.update(PeerList({ip("10.0.0.9")})));
  CHECK(policy.ask(ip("10.0.0.9")).verdict == Verdict::Allow);
}

TEST_CASE("peer policy: refusals before the first list say so, and are forgotten by it",
          "[peer_policy]") {
  PeerPolicy policy;
  CHECK_THAT(policy.giveUp(ip("10.0.0.1")).reason, Catch::Contains("no peer list yet"));
  CHECK(policy.ask(ip("10.0.0.1")).verdict == Verdict::Refuse);
  CHECK(policy.update(PeerList()));  // the first list, even empty, is a change
  CHECK(policy.ask(ip("10.0.0.1")).verdict == Verdict::Wait);
}

TEST_CASE("peer policy: the memory of refusals is bounded", "[peer_policy]") {
  PeerPolicy policy;
  policy.update(PeerList());
  for (Ipv4 a = 1; a <= PeerPolicy::kMaxRemembered; ++a) {
    policy.giveUp(a);
  }
  CHECK(policy.ask(1).verdict == Verdict::Refuse);
  policy.giveUp(PeerPolicy::kMaxRemembered + 1);  // full: starts over
  CHECK(policy.ask(1).verdict == Verdict::Wait);
  CHECK(policy.ask(PeerPolicy::kMaxRemembered + 1).verdict == Verdict::Refuse);
}
