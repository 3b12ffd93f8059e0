#include "common/contract/scheduling_gate.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using gvirtus::addBackendGate;
using gvirtus::backendGateIndex;
using gvirtus::carriesBackendGate;
using gvirtus::removeBackendGate;
using nlohmann::json;

namespace {

json podWithGates(const json& names) {
  json gates = json::array();
  for (const auto& name : names) {
    gates.push_back({{"name", name}});
  }
  return {{"spec", {{"schedulingGates", gates}}}};
}

}  // namespace

TEST_CASE("the backend gate is found where it is, and only under its own name",
          "[contract][gate]") {
  CHECK(backendGateIndex(podWithGates({"example.com/other", "gvirtus.io/backend"})) == 1);
  CHECK_FALSE(carriesBackendGate(podWithGates({"gvirtus.io/backend-x", "example.com/other"})));
  CHECK_FALSE(carriesBackendGate(json{{"spec", json::object()}}));
  CHECK_FALSE(carriesBackendGate(json{{"spec", {{"schedulingGates", "gvirtus.io/backend"}}}}));
}

TEST_CASE("the backend gate is added once, after the pod's own gates", "[contract][gate]") {
  json pod = podWithGates({"example.com/other"});
  addBackendGate(pod);
  addBackendGate(pod);
  CHECK(pod == podWithGates({"example.com/other", "gvirtus.io/backend"}));
  json bare = {{"metadata", {{"name", "p"}}}};
  addBackendGate(bare);
  CHECK(backendGateIndex(bare) == 0);
}

TEST_CASE("taking the backend gate away leaves the other gates in their order",
          "[contract][gate]") {
  json pod = podWithGates({"a.example/x", "gvirtus.io/backend", "b.example/y"});
  removeBackendGate(pod, true);
  CHECK(pod == podWithGates({"a.example/x", "b.example/y"}));

  json alone = podWithGates({"gvirtus.io/backend"});
  removeBackendGate(alone, false);
  CHECK(alone == podWithGates(json::array()));
  removeBackendGate(alone, true);
  CHECK(alone == podWithGates(json::array()));  // nothing of ours to take: left as it is

  json dropped = podWithGates({"gvirtus.io/backend"});
  removeBackendGate(dropped, true);
  CHECK(dropped == json{{"spec", json::object()}});
}
