#include "webhook/placement/assigner.h"

#include <catch2/catch.hpp>

#include "webhook/fixtures.h"

using namespace gvirtus::webhook;
using gvirtus::BackendRequirements;
using gvirtus::webhook::testing::backend;

namespace {

ChooserOptions options() {
  ChooserOptions o;
  o.instance = "webhook-a";
  return o;
}

BackendRequirements podNamed(const std::string& name) {
  BackendRequirements pod;
  pod.pod = name;
  return pod;
}

}  // namespace

TEST_CASE("the assigner gives the policy's backend with its properties.json", "[assigner]") {
  BackendChooser chooser(options());
  BackendAssigner assigner(chooser, {});
  const std::vector<Backend> backends = {backend("10.0.0.1", 3, 0, "b0"),
                                         backend("10.0.0.2", 1, 0, "b1")};
  auto assigned = assigner.assign(backends, podNamed("team-a/app"), {});
  REQUIRE(assigned.has_value());
  CHECK(assigned->assignment.endpoint == "10.0.0.2:9999");
  CHECK(assigned->assignment.backendPod == "gvirtus-system/b1");
  CHECK(assigned->assignment.assignedBy == "webhook-a");
  CHECK(assigned->assignment.properties.find("\"10.0.0.2\"") != std::string::npos);
  CHECK(assigned->choice.backend.endpoint() == "10.0.0.2:9999");
  // Made at admission: counted, not confirmed (the pod may never be created).
  CHECK(chooser.unconfirmedAssignments("10.0.0.2:9999") == 1);
  assigner.cancel(*assigned);
  CHECK(chooser.recentAssignments("10.0.0.2:9999") == 0);
}

TEST_CASE("a release's assignment is confirmed, and a dry run records nothing", "[assigner]") {
  BackendChooser chooser(options());
  BackendAssigner assigner(chooser, {});
  const std::vector<Backend> backends = {backend("10.0.0.1")};
  REQUIRE(assigner.assign(backends, podNamed("team-a/dry"), {.record = false}).has_value());
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 0);
  REQUIRE(assigner.assign(backends, podNamed("team-a/waited"), {.podExists = true}).has_value());
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 1);
  CHECK(chooser.unconfirmedAssignments("10.0.0.1:9999") == 0);
}

TEST_CASE("no backend that can take the pod: it waits, with the chooser's reason", "[assigner]") {
  BackendChooser chooser(options());
  BackendAssigner assigner(chooser, {});
  auto none = assigner.assign({}, podNamed("team-a/app"), {});
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().kind == NotAssigned::Kind::Waits);
  CHECK(none.error().reason == "no GVirtuS backend is ready");
  auto full = assigner.assign({backend("10.0.0.1", 2, 2)}, podNamed("team-a/app"), {});
  REQUIRE_FALSE(full.has_value());
  CHECK(full.error().kind == NotAssigned::Kind::Waits);
}

TEST_CASE("a pinned backend is honoured only when known and able to take the pod", "[assigner]") {
  BackendChooser chooser(options());
  BackendAssigner assigner(chooser, {});
  const std::vector<Backend> backends = {backend("10.0.0.1", 0, 0, "b0", "zone-a"),
                                         backend("10.0.0.2", 4, 4, "b1", "zone-b")};
  // The busier backend is named: it is given, although the policy would choose the other.
  auto pinned = assigner.assign({backend("10.0.0.1", 5, 0, "b0"), backend("10.0.0.2", 0, 0, "b1")},
                                podNamed("team-a/app"), {.pinned = "10.0.0.1:9999"});
  REQUIRE(pinned.has_value());
  CHECK(pinned->assignment.endpoint == "10.0.0.1:9999");
  CHECK(pinned->assignment.preferredZone.empty());

  auto unknown = assigner.assign(backends, podNamed("team-a/app"), {.pinned = "10.9.9.9:9999"});
  REQUIRE_FALSE(unknown.has_value());
  CHECK(unknown.error().kind == NotAssigned::Kind::Denied);
  CHECK_THAT(unknown.error().reason, Catch::Contains("is not a known GVirtuS backend"));

  auto full = assigner.assign(backends, podNamed("team-a/app"), {.pinned = "10.0.0.2:9999"});
  REQUIRE_FALSE(full.has_value());
  CHECK(full.error().kind == NotAssigned::Kind::Denied);
  CHECK_THAT(full.error().reason, Catch::Contains("cannot take this pod"));
  CHECK(chooser.recentAssignments("10.0.0.2:9999") == 0);
}
