#include "webhook/placement/chooser.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "support/manual_clock.h"
#include "webhook/fixtures.h"

using namespace gvirtus::webhook;
using gvirtus::BackendLoad;
using gvirtus::BackendRequirements;
using gvirtus::GpuLoad;
using gvirtus::Policy;
using gvirtus::webhook::testing::backend;
using namespace std::chrono;

namespace {

struct FakeClock {
  system_clock::time_point now = system_clock::now();
  std::function<system_clock::time_point()> fn() {
    return [this] { return now; };
  }
};

ChooserOptions optionsFor(Policy policy, FakeClock& clock, double random = 0) {
  ChooserOptions options;
  options.policy = policy;
  options.now = clock.fn();
  options.random = [random] { return random; };
  return options;
}

// The chooser's clock: the system time at the start, moved only when `clock` is advanced.
std::function<system_clock::time_point()> timeOf(const gvirtus::testing::ManualClock& clock) {
  return [&clock, start = clock.now(), base = system_clock::now()] {
    return base + duration_cast<system_clock::duration>(clock.now() - start);
  };
}

BackendRequirements podNamed(const std::string& name) {
  BackendRequirements pod;
  pod.pod = name;
  return pod;
}

std::string pick(BackendChooser& chooser, const std::vector<Backend>& backends,
                 const BackendRequirements& pod = {}, bool record = true) {
  auto choice = chooser.choose(backends, pod, record);
  INFO((choice ? "" : choice.error().reason));
  REQUIRE(choice.has_value());
  return choice->backend.ip;
}

}  // namespace

TEST_CASE("least-connections picks the least loaded and counts its own assignments", "[chooser]") {
  FakeClock clock;
  BackendChooser chooser(optionsFor(Policy::LeastConnections, clock));
  const std::vector<Backend> backends = {backend("10.0.0.1", 5), backend("10.0.0.2", 2),
                                         backend("10.0.0.3", 3)};
  // A burst of five pods spreads out: 2+1, 2+2 ~ 3, ... instead of all on 10.0.0.2.
  std::map<std::string, int> counts;
  for (int i = 0; i < 5; ++i) {
    ++counts[pick(chooser, backends)];
  }
  CHECK(counts["10.0.0.2"] == 3);  // 2 -> 5
  CHECK(counts["10.0.0.3"] == 2);  // 3 -> 5
  CHECK(counts["10.0.0.1"] == 0);  // 5
  CHECK(chooser.recentAssignments("10.0.0.2:9999") == 3);
  // All at 5: the sixth goes to any one of them, and the seventh to another.
  const std::string sixth = pick(chooser, backends);
  CHECK(pick(chooser, backends) != sixth);

  // A minute later the assignments no longer count (the load report shows them by then).
  clock.now += minutes(1);
  CHECK(chooser.recentAssignments("10.0.0.2:9999") == 0);
}

TEST_CASE("ties go by an order of the backends that is the instance's own", "[chooser]") {
  FakeClock clock;
  const std::vector<Backend> backends = {backend("10.0.0.1"), backend("10.0.0.2"),
                                         backend("10.0.0.3"), backend("10.0.0.4")};
  std::set<std::string> firsts;
  for (int i = 0; i < 16; ++i) {
    ChooserOptions options = optionsFor(Policy::LeastConnections, clock);
    options.instance = "gvirtus-webhook-" + std::to_string(i);
    BackendChooser chooser(options);
    const std::string first = pick(chooser, backends, {}, false);
    CHECK(pick(chooser, backends, {}, false) == first);  // one instance, one order
    firsts.insert(first);
  }
  // Replicas choosing at once among equals mostly choose apart.
  CHECK(firsts.size() >= 3);
}

TEST_CASE("the leader takes ties up the endpoints and the other replica down: never the same",
          "[chooser]") {
  FakeClock clock;
  const std::vector<Backend> backends = {backend("10.0.0.3"), backend("10.0.0.1"),
                                         backend("10.0.0.4"), backend("10.0.0.2")};
  BackendChooser leader(optionsFor(Policy::LeastConnections, clock));
  BackendChooser other(optionsFor(Policy::LeastConnections, clock));
  leader.setTieOrder(TieOrder::Ascending);
  other.setTieOrder(TieOrder::Descending);
  // Each chooses without seeing the other's choices: among any equal ones they differ.
  std::map<std::string, int> counts;
  for (int round = 0; round < 2; ++round) {
    const std::string a = pick(leader, backends);
    const std::string b = pick(other, backends);
    CHECK(a != b);
    ++counts[a];
    ++counts[b];
  }
  CHECK(counts == std::map<std::string, int>{
                      {"10.0.0.1", 1}, {"10.0.0.2", 1}, {"10.0.0.3", 1}, {"10.0.0.4", 1}});
  // Fewer connections still come first, whatever the order.
  const std::vector<Backend> loaded = {backend("10.0.0.1", 3), backend("10.0.0.2", 1),
                                       backend("10.0.0.3", 3)};
  CHECK(pick(leader, loaded, {}, false) == "10.0.0.2");
  CHECK(pick(other, loaded, {}, false) == "10.0.0.2");
}

TEST_CASE("among equally loaded backends, the one given fewer of this instance's own pods",
          "[chooser]") {
  FakeClock clock;
  ChooserOptions options = optionsFor(Policy::LeastConnections, clock);
  options.instance = "webhook-a";
  BackendChooser chooser(options);
  chooser.setTieOrder(TieOrder::Ascending);
  CHECK(pick(chooser, {backend("10.0.0.1"), backend("10.0.0.2")}) == "10.0.0.1");
  // Another replica's pod on 10.0.0.2: one connection each, and 10.0.0.1 has ours.
  Backend second = backend("10.0.0.2");
  second.assigned = {{clock.now, "webhook-b"}};
  CHECK(pick(chooser, {backend("10.0.0.1"), second}, {}, false) == "10.0.0.2");
  // Fewer connections still come first.
  CHECK(pick(chooser, {backend("10.0.0.1"), backend("10.0.0.2", 2)}, {}, false) == "10.0.0.1");
}

TEST_CASE("a dry run records nothing", "[chooser]") {
  FakeClock clock;
  BackendChooser chooser(optionsFor(Policy::LeastConnections, clock));
  const std::vector<Backend> backends = {backend("10.0.0.1", 1), backend("10.0.0.2", 1)};
  const std::string first = pick(chooser, backends, {}, false);
  for (int i = 0; i < 3; ++i) {
    CHECK(pick(chooser, backends, {}, false) == first);
  }
  CHECK(chooser.recentAssignments(first + ":9999") == 0);
}

TEST_CASE("round-robin goes around in endpoint order", "[chooser]") {
  FakeClock clock;
  BackendChooser chooser(optionsFor(Policy::RoundRobin, clock));
  const std::vector<Backend> backends = {backend("10.0.0.3"), backend("10.0.0.1", 9),
                                         backend("10.0.0.2")};
  std::vector<std::string> order;
  for (int i = 0; i < 4; ++i) {
    order.push_back(pick(chooser, backends));
  }
  CHECK(order == std::vector<std::string>{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.1"});
  // A dry run does not advance it.
  CHECK(pick(chooser, backends, {}, false) == "10.0.0.2");
  CHECK(pick(chooser, backends) == "10.0.0.2");
}

TEST_CASE("random uses the random source", "[chooser]") {
  FakeClock clock;
  const std::vector<Backend> backends = {backend("10.0.0.1"), backend("10.0.0.2"),
                                         backend("10.0.0.3")};
  for (auto [r, ip] : {std::pair{0.0, "10.0.0.1"}, std::pair{0.5, "10.0.0.2"},
                       std::pair{0.99, "10.0.0.3"}, std::pair{1.0, "10.0.0.3"}}) {
    BackendChooser chooser(optionsFor(Policy::Random, clock, r));
    CHECK(pick(chooser, backends) == ip);
  }
}

TEST_CASE("same-zone prefers the pod's zone and hands back the zone to prefer", "[chooser]") {
  FakeClock clock;
  BackendChooser chooser(optionsFor(Policy::SameZone, clock));
  const std::vector<Backend> backends = {backend("10.0.0.1", 0, 0, "a", "zone-a"),
                                         backend("10.0.0.2", 5, 0, "b", "zone-b")};
  BackendRequirements inB;
  inB.zone = "zone-b";
  auto choice = chooser.choose(backends, inB, true);
  REQUIRE(choice.has_value());
  CHECK(choice->backend.ip == "10.0.0.2");
  CHECK(choice->preferredZone == "zone-b");
  CHECK(choice->policy == Policy::SameZone);

  // No zone asked: the least loaded, and its zone becomes the pod's preference.
  choice = chooser.choose(backends, {}, true);
  REQUIRE(choice.has_value());
  CHECK(choice->backend.ip == "10.0.0.1");
  CHECK(choice->preferredZone == "zone-a");

  // A zone without backends: any backend.
  BackendRequirements inC;
  inC.zone = "zone-c";
  CHECK(chooser.choose(backends, inC, true)->backend.ip == "10.0.0.1");
}

TEST_CASE("a pod's policy overrides the default", "[chooser]") {
  FakeClock clock;
  BackendChooser chooser(optionsFor(Policy::LeastConnections, clock));
  BackendRequirements pod;
  pod.policy = Policy::RoundRobin;
  const std::vector<Backend> backends = {backend("10.0.0.1", 0), backend("10.0.0.2", 9)};
  CHECK(pick(chooser, backends, pod) == "10.0.0.1");
  CHECK(pick(chooser, backends, pod) == "10.0.0.2");
  CHECK(chooser.choose(backends, pod, true)->policy == Policy::RoundRobin);
}

TEST_CASE("backends at maxSessions are not chosen, own assignments included", "[chooser]") {
  FakeClock clock;
  BackendChooser chooser(optionsFor(Policy::LeastConnections, clock));
  const std::vector<Backend> backends = {backend("10.0.0.1", 1, 3), backend("10.0.0.2", 4, 4)};
  CHECK(pick(chooser, backends) == "10.0.0.1");
  CHECK(pick(chooser, backends) == "10.0.0.1");
  auto none = chooser.choose(backends, {}, true);
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().reason == "none of 2 backends can take the pod: 2 at maxSessions");
}

TEST_CASE("pods other webhook replicas assigned lately count as connections", "[chooser]") {
  FakeClock clock;
  ChooserOptions options = optionsFor(Policy::LeastConnections, clock);
  options.instance = "webhook-a";
  BackendChooser chooser(options);
  // One session left on 10.0.0.1 by its load report; 10.0.0.2 is busier but has room.
  auto backends = [&](const std::string& assignedBy, minutes age) {
    Backend one = backend("10.0.0.1", 1, 2);
    one.assigned = {{clock.now - age, assignedBy}};
    return std::vector<Backend>{one, backend("10.0.0.2", 5)};
  };
  // Another replica's recent pod takes the last session.
  CHECK(pick(chooser, backends("webhook-b", minutes(0))) == "10.0.0.2");
  // A pod that replica assigned before the window is in the load report by now.
  CHECK(pick(chooser, backends("webhook-b", minutes(2)), {}, false) == "10.0.0.1");
  // Its own pods this chooser counts from memory (above: one on 10.0.0.2), not twice.
  CHECK(pick(chooser, backends("webhook-a", minutes(0)), {}, false) == "10.0.0.1");
  // A pod no instance claims (an older webhook) counts like another replica's.
  CHECK(pick(chooser, backends("", minutes(0)), {}, false) == "10.0.0.2");
  CHECK(chooser.instance() == "webhook-a");
  CHECK_FALSE(BackendChooser().instance().empty());
  CHECK(BackendChooser().instance() != BackendChooser().instance());
}

TEST_CASE("GPU memory and GPU count constraints", "[chooser]") {
  FakeClock clock;
  BackendChooser chooser(optionsFor(Policy::LeastConnections, clock));
  Backend small = backend("10.0.0.1");
  small.load->gpus = {GpuLoad{0, 16384, 8192, 0, {}, {}}};
  Backend big = backend("10.0.0.2", 7);
  big.load->gpus = {GpuLoad{0, 81920, 0, 0, {}, {}}, GpuLoad{1, 81920, 81920, 100, {}, {}}};

  BackendRequirements memory;
  memory.gpuMemoryMiB = 16384;
  CHECK(pick(chooser, {small, big}, memory) == "10.0.0.2");
  BackendRequirements twoGpus;
  twoGpus.gpus = 2;
  CHECK(pick(chooser, {small, big}, twoGpus) == "10.0.0.2");

  BackendRequirements tooMuch;
  tooMuch.gpuMemoryMiB = 100000;
  tooMuch.gpus = 1;
  auto none = chooser.choose({small, big}, tooMuch, true);
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().reason ==
        "none of 2 backends can take the pod: 2 without a GPU with 100000 MiB free");

  Backend unknown = backend("10.0.0.3");
  unknown.load.reset();
  none = chooser.choose({unknown}, memory, true);
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().reason.find("1 without a load report") != std::string::npos);
}

TEST_CASE("fresh load reports rank before stale ones and very old ones are gone", "[chooser]") {
  FakeClock clock;
  BackendChooser chooser(optionsFor(Policy::LeastConnections, clock));
  Backend fresh = backend("10.0.0.2", 10);
  Backend stale = backend("10.0.0.1", 0);
  stale.load->updated = clock.now - minutes(2);
  Backend gone = backend("10.0.0.3", 0);
  gone.load->updated = clock.now - minutes(6);
  Backend unreported = backend("10.0.0.4");
  unreported.load.reset();

  CHECK(pick(chooser, {stale, fresh, gone, unreported}) == "10.0.0.2");
  CHECK(pick(chooser, {stale, gone}) == "10.0.0.1");
  CHECK(pick(chooser, {unreported, gone}) == "10.0.0.4");
  auto none = chooser.choose({gone}, {}, true);
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().reason ==
        "none of 1 backend can take the pod: 1 with a load report older than 5m");
}

TEST_CASE("a load report dated ahead of the clock counts as stale, within a small skew",
          "[chooser]") {
  FakeClock clock;
  BackendChooser chooser(optionsFor(Policy::LeastConnections, clock));
  // Claims no connections, and would stay fresh for ever.
  Backend ahead = backend("10.0.0.1", 0);
  ahead.load->updated = clock.now + hours(1);
  Backend honest = backend("10.0.0.2", 5);
  CHECK(pick(chooser, {ahead, honest}, {}, false) == "10.0.0.2");
  // A clock a second ahead is a clock, not a claim.
  Backend skewed = backend("10.0.0.3", 0);
  skewed.load->updated = clock.now + seconds(1);
  CHECK(pick(chooser, {ahead, honest, skewed}, {}, false) == "10.0.0.3");
  // Stale, not gone: with no fresh backend it still serves.
  CHECK(pick(chooser, {ahead}, {}, false) == "10.0.0.1");
}

TEST_CASE("a backend's load report never counts fewer connections than the pods wired to it",
          "[chooser]") {
  FakeClock clock;
  BackendChooser chooser(optionsFor(Policy::LeastConnections, clock));
  // A taken shim reports no connections, though five live pods were given to it.
  Backend underReporting = backend("10.0.0.1", 0, 4);
  underReporting.wired = 5;
  Backend honest = backend("10.0.0.2", 2, 4);
  honest.wired = 2;
  CHECK(pick(chooser, {underReporting, honest}, {}, false) == "10.0.0.2");
  auto none = chooser.choose({underReporting}, {}, false);
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().reason == "none of 1 backend can take the pod: 1 at maxSessions");
  // An honest report above the wired pods (several connections per pod) stands.
  Backend busy = backend("10.0.0.3", 3, 4);
  busy.wired = 1;
  Backend wiredMore = backend("10.0.0.4", 1, 4);
  wiredMore.wired = 2;
  CHECK(pick(chooser, {busy, wiredMore}, {}, false) == "10.0.0.4");
}

TEST_CASE("no backend at all", "[chooser]") {
  FakeClock clock;
  BackendChooser chooser(optionsFor(Policy::LeastConnections, clock));
  auto none = chooser.choose({}, {}, true);
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().reason == "no GVirtuS backend is ready");
}

TEST_CASE("static backends without load reports still take pods", "[chooser]") {
  FakeClock clock;
  BackendChooser chooser(optionsFor(Policy::LeastConnections, clock));
  Backend a;
  a.ip = "192.0.2.1";
  a.port = 9999;
  Backend b = a;
  b.ip = "192.0.2.2";
  const std::string first = pick(chooser, {a, b});
  CHECK(pick(chooser, {a, b}) != first);  // one each
  chooser.recordAssignment("192.0.2.1:9999");
  chooser.recordAssignment("192.0.2.1:9999");
  CHECK(pick(chooser, {a, b}) == "192.0.2.2");
}

TEST_CASE("a cancelled assignment no longer counts", "[chooser]") {
  FakeClock clock;
  BackendChooser chooser(optionsFor(Policy::LeastConnections, clock));
  const std::vector<Backend> backends = {backend("10.0.0.1", 0, 1)};
  auto first = chooser.choose(backends, {}, true);
  REQUIRE(first.has_value());
  CHECK(first->reservation != 0);
  CHECK_FALSE(chooser.choose(backends, {}, true).has_value());
  chooser.cancelAssignment(*first);
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 0);
  auto again = chooser.choose(backends, {}, true);
  REQUIRE(again.has_value());
  // A dry run reserves nothing, so there is nothing to cancel.
  auto dry = chooser.choose({backend("10.0.0.2")}, {}, false);
  REQUIRE(dry.has_value());
  CHECK(dry->reservation == 0);
  chooser.cancelAssignment(*dry);
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 1);
}

TEST_CASE("GPU memory taken by recent assignments counts against that GPU", "[chooser]") {
  FakeClock clock;
  BackendChooser chooser(optionsFor(Policy::LeastConnections, clock));
  Backend two = backend("10.0.0.1");
  two.load->gpus = {GpuLoad{0, 40960, 0, 0, {}, {}}, GpuLoad{1, 40960, 10240, 0, {}, {}}};
  BackendRequirements quarter;
  quarter.gpuFraction = 0.25;  // 10240 MiB of a 40 GiB GPU
  // Each goes to the GPU with the most left (the first on a tie), until neither has 10240.
  std::vector<int64_t> gpus;
  while (auto choice = chooser.choose({two}, quarter, true)) {
    REQUIRE(choice->memoryMiB == 10240);
    gpus.push_back(*choice->gpuIndex);
  }
  CHECK(gpus == std::vector<int64_t>{0, 0, 1, 0, 1, 0, 1});

  // A minute later the reservations are gone.
  clock.now += minutes(1);
  CHECK(chooser.choose({two}, quarter, false).has_value());
}

namespace {

// One backend with one GPU of 16 GiB, nothing used; pods asking for half of it.
struct HalvesOfOneGpu {
  FakeClock clock;
  BackendChooser chooser{optionsFor(Policy::LeastConnections, clock)};
  Backend one = [] {
    Backend b = backend("10.0.0.1");
    b.load->gpus = {GpuLoad{0, 16384, 0, 0, {}, {}}};
    return b;
  }();
  BackendRequirements half = [] {
    BackendRequirements r;
    r.gpuFraction = 0.5;
    return r;
  }();
};

}  // namespace

TEST_CASE_METHOD(HalvesOfOneGpu,
                 "the GPU shares of running pods hold their memory beyond the assignment window",
                 "[chooser]") {
  // Two halves are given the GPU; a third is refused.
  for (const char* pod : {"ns/half-1", "ns/half-2"}) {
    half.pod = pod;
    auto choice = chooser.choose({one}, half, true);
    REQUIRE(choice.has_value());
    CHECK(choice->gpuIndex == 0);
    // The cache sees the pod with its backend-gpu annotation: the same memory, counted once.
    one.shares.push_back({pod, 0, half});
  }
  half.pod = "ns/half-3";
  auto third = chooser.choose({one}, half, false);
  REQUIRE_FALSE(third.has_value());
  CHECK_THAT(third.error().reason, Catch::Contains("without a GPU with 0.5 of its memory free"));

  // Long after the window, the shares still hold the GPU, though it reports nothing used.
  clock.now += minutes(10);
  one.load->updated = clock.now;
  CHECK_FALSE(chooser.choose({one}, half, false).has_value());
  // The pods' use is within their shares, not beside them.
  one.load->gpus[0].memoryUsedMiB = 8000;
  CHECK_FALSE(chooser.choose({one}, half, false).has_value());
  one.shares.pop_back();
  CHECK(chooser.choose({one}, half, false).has_value());
  // Use beyond the shares counts as it is.
  one.load->gpus[0].memoryUsedMiB = 9000;
  CHECK_FALSE(chooser.choose({one}, half, false).has_value());
}

TEST_CASE_METHOD(HalvesOfOneGpu,
                 "a recent assignment of a pod not yet seen with its share still counts",
                 "[chooser]") {
  half.pod = "ns/seen";
  REQUIRE(chooser.choose({one}, half, true).has_value());
  one.shares.push_back({"ns/seen", 0, half});
  // At admission a generateName pod has no name: its reservation cannot be matched to its
  // share, so both count until the window ends (late rather than overbooked).
  half.pod = "";
  REQUIRE(chooser.choose({one}, half, true).has_value());
  CHECK_FALSE(chooser.choose({one}, half, false).has_value());
  clock.now += minutes(1);
  one.load->updated = clock.now;
  CHECK(chooser.choose({one}, half, false).has_value());
}

TEST_CASE("an assignment made at admission lapses within seconds unless its pod is seen",
          "[chooser]") {
  gvirtus::testing::ManualClock clock;
  const auto now = timeOf(clock);
  ChooserOptions options;
  options.instance = "webhook-a";
  options.now = now;
  BackendChooser chooser(options);
  REQUIRE(options.unconfirmedLifetime == seconds(5));
  Backend one = backend("10.0.0.1", 0, 2);
  REQUIRE(chooser.choose({one}, podNamed("team-a/real"), true).has_value());
  REQUIRE(chooser.choose({one}, podNamed("team-a/forged"), true).has_value());
  CHECK_FALSE(chooser.choose({one}, {}, false).has_value());  // 2 of 2 sessions
  CHECK(chooser.unconfirmedAssignments("10.0.0.1:9999") == 2);

  // The real pod is created; the webhook's cache shows it, assigned by this instance. The
  // forged review's pod never appears.
  clock.advance(seconds(1));
  one.assigned = {AssignedPod{now(), "webhook-a", "team-a/real"}};
  CHECK_FALSE(chooser.choose({one}, {}, false).has_value());  // both still count
  CHECK(chooser.unconfirmedAssignments("10.0.0.1:9999") == 1);

  // Five seconds after the review the forged one no longer counts; the confirmed one does.
  clock.advance(seconds(4) - milliseconds(1));
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 2);
  clock.advance(milliseconds(1));
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 1);
  CHECK(chooser.unconfirmedAssignments("10.0.0.1:9999") == 0);
  CHECK(pick(chooser, {one}, {}, false) == "10.0.0.1");

  // The confirmed one holds for the whole window, as before.
  clock.advance(seconds(54));
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 1);
  clock.advance(seconds(1));
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 0);
}

TEST_CASE("a pod seen after the short lifetime still holds its assignment", "[chooser]") {
  gvirtus::testing::ManualClock clock;
  const auto now = timeOf(clock);
  ChooserOptions options;
  options.instance = "webhook-a";
  options.now = now;
  BackendChooser chooser(options);
  Backend one = backend("10.0.0.1", 0, 4);
  const auto reviewed = now();
  REQUIRE(chooser.choose({one}, podNamed("team-a/slow"), true).has_value());
  // The cache showed the pod at once, but no review came until ten seconds later: the
  // next choice confirms before it prunes.
  one.assigned = {AssignedPod{reviewed, "webhook-a", "team-a/slow"}};
  clock.advance(seconds(10));
  REQUIRE(chooser.choose({one}, {}, false).has_value());
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 1);
}

TEST_CASE("a pod reviewed without a name confirms one assignment made before it was created",
          "[chooser]") {
  gvirtus::testing::ManualClock clock;
  const auto now = timeOf(clock);
  ChooserOptions options;
  options.instance = "webhook-a";
  options.now = now;
  BackendChooser chooser(options);
  Backend one = backend("10.0.0.1");
  // Three reviews without a name (generateName): a Deployment's pod and two forged ones.
  for (int i = 0; i < 3; ++i) {
    REQUIRE(chooser.choose({one}, {}, true).has_value());
  }
  clock.advance(seconds(1));
  one.assigned = {
      // The Deployment's pod, created after its review.
      AssignedPod{now(), "webhook-a", "team-a/web-7d9f-x2x4q"},
      // Another replica's pod confirms none of this one's.
      AssignedPod{now(), "webhook-b", "team-a/other"},
      // Nor does a pod of this instance created well before the reviews.
      AssignedPod{now() - seconds(30), "webhook-a", "team-a/old"},
  };
  REQUIRE(chooser.choose({one}, {}, false).has_value());
  CHECK(chooser.unconfirmedAssignments("10.0.0.1:9999") == 2);
  // The same pod, seen again, confirms nothing more.
  REQUIRE(chooser.choose({one}, {}, true).has_value());
  REQUIRE(chooser.choose({one}, {}, false).has_value());
  CHECK(chooser.unconfirmedAssignments("10.0.0.1:9999") == 3);
  clock.advance(seconds(5));
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 1);
}

TEST_CASE("an assignment whose pod exists holds for the window, and lifetime zero holds all",
          "[chooser]") {
  gvirtus::testing::ManualClock clock;
  ChooserOptions options;
  options.now = timeOf(clock);
  BackendChooser chooser(options);
  const std::vector<Backend> backends = {backend("10.0.0.1")};
  // The waiting-pod controller releases a pod it read from the cluster.
  auto released = chooser.choose(backends, podNamed("team-a/waited"), true);
  REQUIRE(released.has_value());
  chooser.confirmAssignment(*released);
  CHECK(chooser.unconfirmedAssignments("10.0.0.1:9999") == 0);
  clock.advance(seconds(30));
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 1);

  // Static backends: no one watches their pods, every assignment counts for the window.
  options.unconfirmedLifetime = milliseconds::zero();
  BackendChooser statics(options);
  REQUIRE(statics.choose(backends, {}, true).has_value());
  clock.advance(seconds(59));
  CHECK(statics.recentAssignments("10.0.0.1:9999") == 1);
  clock.advance(seconds(1));
  CHECK(statics.recentAssignments("10.0.0.1:9999") == 0);
}

TEST_CASE("an assignment stops counting once its pod, seen, is deleted or finished", "[chooser]") {
  gvirtus::testing::ManualClock clock;
  const auto now = timeOf(clock);
  ChooserOptions options;
  options.instance = "webhook-a";
  options.now = now;
  BackendChooser chooser(options);
  Backend one = backend("10.0.0.1", 0, 0, "backend-0");
  REQUIRE(chooser.choose({one}, podNamed("team-a/deleted"), true).has_value());
  auto released = chooser.choose({one}, podNamed("team-a/released"), true);
  REQUIRE(released.has_value());
  chooser.confirmAssignment(*released);

  // Both pods are seen; then the first is deleted. The released one is not in the cache
  // yet a moment later: it was never listed, so it still counts.
  clock.advance(seconds(1));
  one.assigned = {AssignedPod{now(), "webhook-a", "team-a/deleted"}};
  REQUIRE(chooser.choose({one}, {}, false).has_value());
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 2);
  clock.advance(seconds(1));
  one.assigned = {};
  REQUIRE(chooser.choose({one}, {}, false).has_value());
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 1);

  // The released pod shows up, then finishes (Backend::assigned leaves finished pods out).
  one.assigned = {AssignedPod{now(), "webhook-a", "team-a/released"}};
  REQUIRE(chooser.choose({one}, {}, false).has_value());
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 1);
  one.assigned = {};
  REQUIRE(chooser.choose({one}, {}, false).has_value());
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 0);
}

TEST_CASE("a released pod that only aged out of the backend's list still counts", "[chooser]") {
  gvirtus::testing::ManualClock clock;
  const auto now = timeOf(clock);
  ChooserOptions options;
  options.instance = "webhook-a";
  options.now = now;
  BackendChooser chooser(options);
  Backend one = backend("10.0.0.1", 0, 0, "backend-0");
  // A pod that waited 55 s is released: its reservation counts for a minute from now.
  const auto created = now() - seconds(55);
  auto released = chooser.choose({one}, podNamed("team-a/waited"), true);
  REQUIRE(released.has_value());
  chooser.confirmAssignment(*released);
  one.assigned = {AssignedPod{created, "webhook-a", "team-a/waited"}};
  REQUIRE(chooser.choose({one}, {}, false).has_value());
  // Five seconds on, the list (pods created within the window) leaves it out.
  clock.advance(seconds(6));
  one.assigned = {};
  REQUIRE(chooser.choose({one}, {}, false).has_value());
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 1);
}

TEST_CASE("a backend's assigned pods are found by name, whether or not the list is indexed",
          "[chooser]") {
  Backend one = backend("10.0.0.1");
  for (const char* pod : {"team-b/run-2", "team-a/run-10", "team-a/run-1", "team-c/run-0"}) {
    one.assigned.push_back(AssignedPod{{}, "webhook-a", pod});
  }
  auto namesOf = [](const Backend& b) {
    std::vector<std::string> found;
    for (const char* pod : {"team-a/run-1", "team-a/run-10", "team-b/run-2", "team-c/run-0",
                            "team-a/run-2", "team-a/run", "team-d/run-0", ""}) {
      const AssignedPod* at = b.assignedPod(pod);
      found.push_back(at != nullptr ? at->pod : "-");
    }
    return found;
  };
  const std::vector<std::string> expected = {
      "team-a/run-1", "team-a/run-10", "team-b/run-2", "team-c/run-0", "-", "-", "-", "-"};
  CHECK(namesOf(one) == expected);  // not indexed: a walk of the list
  one.indexAssigned();
  REQUIRE(one.assignedByName.size() == one.assigned.size());
  CHECK(namesOf(one) == expected);
  // The list keeps its order (creation order, which confirmations follow).
  CHECK(one.assigned.front().pod == "team-b/run-2");
  // A list changed after indexing is walked, not searched with a stale index.
  one.assigned.push_back(AssignedPod{{}, "webhook-a", "team-a/new"});
  CHECK(one.assignedPod("team-a/new") != nullptr);
}
