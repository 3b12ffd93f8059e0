#include "webhook/admission/scheduling_map.h"

#include <catch2/catch.hpp>

#include "webhook/fixtures.h"

using namespace gvirtus::webhook;
using nlohmann::json;

namespace {

const char* kClassic = "0=node1:0,1\n1=node2:2\n2=node3:0,1,2\n3=node4:3\n4=node4:3\n";

json statefulPod(int index, json spec = json::object()) {
  if (!spec.contains("containers")) {
    spec["containers"] =
        json::array({{{"name", "app"}, {"image", "x"}}, {{"name", "side"}, {"image", "y"}}});
  }
  return {{"metadata",
           {{"name", "web-" + std::to_string(index)},
            {"labels", {{"apps.kubernetes.io/pod-index", std::to_string(index)}}},
            {"annotations", {{"gpu-scheduling-map", kClassic}}}}},
          {"spec", spec}};
}

std::string envOf(const json& container, const std::string& name) {
  for (const auto& e : container.value("env", json::array())) {
    if (e["name"] == name) {
      return e.value("value", "");
    }
  }
  return "<unset>";
}

json placed(json pod, const SchedulingEntry& entry) {
  applySchedulingEntry(pod, entry);
  return pod;
}

}  // namespace

TEST_CASE("the classic five-entry map", "[scheduling-map]") {
  auto map = parseSchedulingMap(kClassic);
  REQUIRE(map.has_value());
  REQUIRE(map->size() == 5);
  CHECK(map->at(0).node == "node1");
  CHECK(map->at(0).devices == "0,1");
  CHECK(map->at(2).devices == "0,1,2");
  CHECK(map->at(4).node == "node4");
  CHECK(map->at(4).line == 5);
}

TEST_CASE("whitespace, blank lines, comments and a trailing newline are fine", "[scheduling-map]") {
  auto map = parseSchedulingMap("\n  # pods of web\n 0 = node1 : 0, 1 \r\n\n\t3=node4:3\n\n");
  REQUIRE(map.has_value());
  REQUIRE(map->size() == 2);
  CHECK(map->at(0).node == "node1");
  CHECK(map->at(0).devices == "0,1");
  CHECK(map->at(0).line == 3);
  CHECK(map->at(3).line == 5);
  CHECK(parseSchedulingMap("").value().empty());
}

TEST_CASE("a map that does not parse names the line", "[scheduling-map]") {
  struct Case {
    const char* text;
    const char* expected;
  };
  for (const Case& c :
       {Case{"0=node1:0\n1node2:2\n", "line 2 (\"1node2:2\"): missing '='"},
        Case{"0=:1\n", "line 1 (\"0=:1\"): empty node name"},
        Case{"0=node1:0\n\n2=node3:a,b\n",
             "line 3 (\"2=node3:a,b\"): devices \"a,b\" are not "
             "comma-separated integers"},
        Case{"0=node1:0,,1", "line 1 (\"0=node1:0,,1\"): devices"},
        Case{"0=node1:", "line 1 (\"0=node1:\"): devices \"\" are not"},
        Case{"0=node1:-1", "devices \"-1\" are not"},
        Case{"0=node1", "line 1 (\"0=node1\"): missing ':'"},
        Case{"x=node1:0", "line 1 (\"x=node1:0\"): index \"x\" is not a non-negative integer"},
        Case{"-1=node1:0", "index \"-1\""}, Case{"0=node 1:0", "holds whitespace"},
        Case{"0=node1:0\n1=node2:1\n0=node3:2",
             "line 3 (\"0=node3:2\"): duplicate index 0 (first "
             "on line 1)"}}) {
    INFO(c.text);
    auto map = parseSchedulingMap(c.text);
    REQUIRE_FALSE(map.has_value());
    CHECK_THAT(map.error().message, Catch::Contains(c.expected));
    CHECK_THAT(map.error().message, Catch::StartsWith("gpu-scheduling-map line "));
  }
}

TEST_CASE("pod index from the label, else the name's suffix", "[scheduling-map]") {
  CHECK(podIndex(statefulPod(3)) == 3);
  json byName = {{"metadata", {{"name", "web-12"}}}};
  CHECK(podIndex(byName) == 12);
  json labelWins = {
      {"metadata", {{"name", "web-1"}, {"labels", {{"apps.kubernetes.io/pod-index", "7"}}}}}};
  CHECK(podIndex(labelWins) == 7);
  CHECK_FALSE(podIndex(json{{"metadata", {{"name", "web"}}}}).has_value());
  CHECK_FALSE(podIndex(json{{"metadata", {{"name", "web-x"}}}}).has_value());
  CHECK(podIndex(json{{"metadata", json::object()}}, "db-4") == 4);
  CHECK_FALSE(podIndex(json::object()).has_value());
}

TEST_CASE("the entry: required hostname affinity and CUDA_VISIBLE_DEVICES everywhere",
          "[scheduling-map]") {
  json pod = statefulPod(2);
  pod["spec"]["initContainers"] = json::array({{{"name", "init"}, {"image", "z"}}});
  pod["spec"]["containers"][1]["env"] = json::array(
      {{{"name", "A"}, {"value", "1"}}, {{"name", "CUDA_VISIBLE_DEVICES"}, {"value", "7"}}});
  auto map = parseSchedulingMap(kClassic);
  const json out = placed(pod, map->at(2));

  const json& terms = out["spec"]["affinity"]["nodeAffinity"]
                         ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  REQUIRE(terms.size() == 1);
  CHECK(terms[0]["matchExpressions"] ==
        json::parse(R"([{"key":"kubernetes.io/hostname","operator":"In","values":["node3"]}])"));
  CHECK(envOf(out["spec"]["containers"][0], "CUDA_VISIBLE_DEVICES") == "0,1,2");
  CHECK(envOf(out["spec"]["containers"][1], "CUDA_VISIBLE_DEVICES") == "0,1,2");
  CHECK(envOf(out["spec"]["containers"][1], "A") == "1");
  CHECK(envOf(out["spec"]["initContainers"][0], "CUDA_VISIBLE_DEVICES") == "0,1,2");
  CHECK(out["spec"]["containers"][1]["env"].size() == 2);  // replaced in place

  // Applied again: nothing more.
  CHECK(placed(out, map->at(2)) == out);
}

TEST_CASE("the node is ANDed into every existing node selector term", "[scheduling-map]") {
  json spec = {
      {"containers", json::array({{{"name", "app"}, {"image", "x"}}})},
      {"affinity",
       {{"nodeAffinity",
         {{"requiredDuringSchedulingIgnoredDuringExecution",
           {{"nodeSelectorTerms",
             json::array(
                 {{{"matchExpressions", json::array({{{"key", "gpu"}, {"operator", "Exists"}}})}},
                  {{"matchFields", json::array({{{"key", "metadata.name"},
                                                 {"operator", "In"},
                                                 {"values", {"node1", "node2"}}}})}}})}}}}}}}};
  json pod = statefulPod(0, spec);
  auto map = parseSchedulingMap(kClassic);
  const json out = placed(pod, map->at(0));
  const json& terms = out["spec"]["affinity"]["nodeAffinity"]
                         ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  REQUIRE(terms.size() == 2);
  CHECK(terms[0]["matchExpressions"].size() == 2);
  CHECK(terms[0]["matchExpressions"][0]["key"] == "gpu");
  CHECK(terms[0]["matchExpressions"][1]["values"] == json::array({"node1"}));
  CHECK(terms[1]["matchFields"].size() == 1);
  CHECK(terms[1]["matchExpressions"][0]["key"] == "kubernetes.io/hostname");
  CHECK(placed(out, map->at(0)) == out);
}
