#include "common/json_patch.h"

#include <catch2/catch.hpp>

using gvirtus::applyJsonPatch;
using gvirtus::JsonPatch;
using gvirtus::jsonPointer;
using nlohmann::json;

namespace {

json applyPatch(const json& doc, const JsonPatch& patch) {
  auto result = applyJsonPatch(doc, patch.toJson());
  INFO(patch.dump());
  REQUIRE(result);
  return *result;
}

json applyRaw(const json& doc, const char* patch) {
  auto result = applyJsonPatch(doc, json::parse(patch));
  INFO(patch);
  REQUIRE(result);
  return *result;
}

std::string applyError(const json& doc, const char* patch) {
  auto result = applyJsonPatch(doc, json::parse(patch));
  INFO(patch);
  REQUIRE_FALSE(result);
  return result.error().message;
}

json pod() {
  return json::parse(R"({
    "metadata": {"name": "app", "labels": {"gvirtus.io/enabled": "true"}},
    "spec": {"containers": [{"name": "main", "image": "app"}, {"name": "side"}]}
  })");
}

}  // namespace

TEST_CASE("jsonPointer escapes tokens as RFC 6901 says", "[json_patch]") {
  CHECK(jsonPointer({"metadata", "annotations", "gvirtus.io/backend"}) ==
        "/metadata/annotations/gvirtus.io~1backend");
  CHECK(jsonPointer({"a~b", "c/d~/e"}) == "/a~0b/c~1d~0~1e");
  CHECK(jsonPointer({}) == "");
  CHECK(jsonPointer({""}) == "/");
  CHECK(jsonPointer(std::vector<std::string>{"spec", "containers", "0"}) == "/spec/containers/0");
  CHECK(gvirtus::escapeJsonPointerToken("~1") == "~01");
}

TEST_CASE("parseJsonPointer undoes jsonPointer", "[json_patch]") {
  const std::vector<std::string> tokens{"a~b", "c/d", "", "~01", "x"};
  auto parsed = gvirtus::parseJsonPointer(jsonPointer(tokens));
  REQUIRE(parsed);
  CHECK(*parsed == tokens);
  CHECK(gvirtus::parseJsonPointer("")->empty());
  CHECK(*gvirtus::parseJsonPointer("/") == std::vector<std::string>{""});
  CHECK_FALSE(gvirtus::parseJsonPointer("a/b"));
  CHECK_FALSE(gvirtus::parseJsonPointer("/a~2"));
  CHECK_FALSE(gvirtus::parseJsonPointer("/a~"));
}

TEST_CASE("JsonPatch builds RFC 6902 operations", "[json_patch]") {
  JsonPatch patch;
  CHECK(patch.empty());
  patch.add("/a", 1).replace("/b", json{{"x", true}}).remove("/c").test("/d", "v");
  CHECK_FALSE(patch.empty());
  CHECK(patch.size() == 4);
  CHECK(patch.toJson() == json::parse(R"([
    {"op": "add", "path": "/a", "value": 1},
    {"op": "replace", "path": "/b", "value": {"x": true}},
    {"op": "remove", "path": "/c"},
    {"op": "test", "path": "/d", "value": "v"}
  ])"));
  CHECK(json::parse(patch.dump()) == patch.toJson());
  CHECK(JsonPatch().dump() == "[]");
  // dump() writes the text itself: the very bytes of the array's dump.
  JsonPatch escaped = patch;
  escaped.add("/metadata/annotations/gvirtus.io~1a\"b\\c\n", json{{"z", "\u00e9\t"}, {"a", 1.5}});
  CHECK(escaped.dump() == escaped.toJson().dump());

  JsonPatch more;
  more.add("/e", json::array());
  patch.append(more);
  CHECK(patch.size() == 5);
  CHECK(patch.toJson()[4] == json::parse(R"({"op": "add", "path": "/e", "value": []})"));
}

TEST_CASE("applyJsonPatch applies all or nothing, and an error is a value", "[json_patch]") {
  const json doc = json::parse(R"({"a":{"b":1},"list":[1,2]})");
  CHECK(
      applyRaw(doc, R"([{"op":"add","path":"/a/c","value":2},{"op":"remove","path":"/list/0"}])") ==
      json::parse(R"({"a":{"b":1,"c":2},"list":[2]})"));
  // The second operation fails: nothing of the first is kept (the document is a copy).
  CHECK_FALSE(
      applyError(doc,
                 R"([{"op":"add","path":"/x","value":1},{"op":"test","path":"/a/b","value":2}])")
          .empty());
  CHECK_FALSE(applyError(doc, R"({"op":"add"})").empty());
  CHECK_FALSE(applyError(doc, R"([{"op":"add","path":"/x/y","value":1}])").empty());
}

TEST_CASE("setMapEntry adds the map when it is missing", "[json_patch]") {
  const json doc = pod();
  JsonPatch patch;
  patch.setMapEntry(doc, {"metadata", "annotations"}, "gvirtus.io/backend", "10.0.0.1:9999");
  patch.setMapEntry(doc, {"metadata", "annotations"}, "gvirtus.io/backend-pod", "ns/b-0");
  // The second entry lands in the map the first one creates, not in a second copy of it.
  REQUIRE(patch.size() == 2);
  CHECK(patch.toJson()[0] == json::parse(R"({"op": "add", "path": "/metadata/annotations",
      "value": {"gvirtus.io/backend": "10.0.0.1:9999"}})"));
  CHECK(patch.toJson()[1]["path"] == "/metadata/annotations/gvirtus.io~1backend-pod");
  const json patched = applyPatch(doc, patch);
  CHECK(patched["metadata"]["annotations"] == json::parse(R"({
      "gvirtus.io/backend": "10.0.0.1:9999", "gvirtus.io/backend-pod": "ns/b-0"})"));

  SECTION("applying the patch twice is a no-op") {
    CHECK(applyPatch(patched, patch) == patched);
  }
  SECTION("a patch built from the patched document is empty") {
    JsonPatch again;
    again.setMapEntry(patched, {"metadata", "annotations"}, "gvirtus.io/backend", "10.0.0.1:9999");
    again.setMapEntry(patched, {"metadata", "annotations"}, "gvirtus.io/backend-pod", "ns/b-0");
    CHECK(again.empty());
  }
}

TEST_CASE("setMapEntry adds, replaces or leaves a key", "[json_patch]") {
  const json doc = pod();
  JsonPatch patch;
  patch.setMapEntry(doc, {"metadata", "labels"}, "gvirtus.io/enabled", "true");
  CHECK(patch.empty());
  patch.setMapEntry(doc, {"metadata", "labels"}, "kai.scheduler/queue", "gpu");
  REQUIRE(patch.size() == 1);
  CHECK(patch.toJson()[0] == json::parse(R"({"op": "add",
      "path": "/metadata/labels/kai.scheduler~1queue", "value": "gpu"})"));
  patch.setMapEntry(doc, {"metadata", "labels"}, "gvirtus.io/enabled", "false");
  REQUIRE(patch.size() == 2);
  CHECK(patch.toJson()[1]["op"] == "replace");
  // Judged against the document with the patch so far: setting the same value again adds
  // nothing, and setting the old value back is a replace.
  patch.setMapEntry(doc, {"metadata", "labels"}, "kai.scheduler/queue", "gpu");
  CHECK(patch.size() == 2);
  patch.setMapEntry(doc, {"metadata", "labels"}, "gvirtus.io/enabled", "true");
  CHECK(patch.size() == 3);
  const json patched = applyPatch(doc, patch);
  CHECK(patched["metadata"]["labels"] == json::parse(R"({
      "gvirtus.io/enabled": "true", "kai.scheduler/queue": "gpu"})"));
  CHECK(applyPatch(patched, patch) == patched);
}

TEST_CASE("setMapEntry creates nested maps and steps into arrays", "[json_patch]") {
  const json doc = pod();
  JsonPatch patch;
  patch.setMapEntry(doc, {"spec", "containers", "0", "resources", "limits"}, "nvidia.com/gpu", "1");
  patch.setMapEntry(doc, {"spec", "containers", "0", "resources", "requests"}, "cpu", "1");
  patch.setMapEntry(doc, {"spec", "nodeSelector"}, "gvirtus.io/frontend.allowed", "true");
  patch.setMapEntry(doc, {"spec", "template", "metadata", "labels"}, "a", "b");
  const json patched = applyPatch(doc, patch);
  CHECK(patched["spec"]["containers"][0]["resources"] ==
        json::parse(R"({"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}})"));
  CHECK(patched["spec"]["containers"][1] == doc["spec"]["containers"][1]);
  CHECK(patched["spec"]["nodeSelector"] == json{{"gvirtus.io/frontend.allowed", "true"}});
  CHECK(patched["spec"]["template"] == json::parse(R"({"metadata": {"labels": {"a": "b"}}})"));
  CHECK(patch.toJson()[0]["path"] == "/spec/containers/0/resources");
  CHECK(applyPatch(patched, patch) == patched);
}

TEST_CASE("setMapEntry replaces a null or non-object map", "[json_patch]") {
  json doc = pod();
  doc["metadata"]["annotations"] = nullptr;
  JsonPatch patch;
  patch.setMapEntry(doc, {"metadata", "annotations"}, "k", "v");
  CHECK(applyPatch(doc, patch)["metadata"]["annotations"] == json{{"k", "v"}});

  JsonPatch root;
  root.setMapEntry(json::array(), {}, "k", 1);
  CHECK(applyPatch(json::array(), root) == json{{"k", 1}});
  JsonPatch rootObject;
  rootObject.setMapEntry(json{{"k", 1}}, {}, "k", 1);
  CHECK(rootObject.empty());
}

TEST_CASE("removeMapEntry removes a key only when present", "[json_patch]") {
  const json doc = pod();
  JsonPatch patch;
  patch.removeMapEntry(doc, {"metadata", "labels"}, "missing");
  patch.removeMapEntry(doc, {"metadata", "annotations"}, "missing");
  CHECK(patch.empty());
  patch.removeMapEntry(doc, {"metadata", "labels"}, "gvirtus.io/enabled");
  patch.removeMapEntry(doc, {"metadata", "labels"}, "gvirtus.io/enabled");
  REQUIRE(patch.size() == 1);
  CHECK(patch.toJson()[0] ==
        json::parse(R"({"op": "remove", "path": "/metadata/labels/gvirtus.io~1enabled"})"));
  CHECK(applyPatch(doc, patch)["metadata"]["labels"] == json::object());
}

TEST_CASE("the patch between two documents turns one into the other", "[json_patch]") {
  const json from = json::parse(R"({
      "metadata": {"name": "p", "labels": {"app": "x"}, "annotations": {"a": "1", "b/c": "2"}},
      "spec": {"containers": [{"name": "app", "env": [{"name": "A", "value": "1"}]},
                              {"name": "side"}],
               "gates": [{"name": "g"}]}})");
  json to = from;
  to["metadata"]["labels"]["tier"] = "gpu";                                 // a member added
  to["metadata"]["annotations"].erase("b/c");                               // a member removed
  to["spec"]["containers"][0]["env"].push_back({{"name", "B"}, {"v", 2}});  // array grown
  to["spec"]["containers"][1]["image"] = "img";                             // element changed
  to["spec"]["gates"] = json::array();                                      // array emptied
  to["spec"]["nodeSelector"] = {{"k", "v"}};                                // object added

  const JsonPatch patch = JsonPatch::between(from, to);
  CHECK(applyPatch(from, patch) == to);
  // Only what differs: the annotation map whole (it lost a member), the env array whole
  // (its length changed), one member inside the same-length containers array.
  CHECK(patch.toJson() == json::parse(R"([
      {"op": "add", "path": "/metadata/annotations", "value": {"a": "1"}},
      {"op": "add", "path": "/metadata/labels/tier", "value": "gpu"},
      {"op": "add", "path": "/spec/containers/0/env",
       "value": [{"name": "A", "value": "1"}, {"name": "B", "v": 2}]},
      {"op": "add", "path": "/spec/containers/1/image", "value": "img"},
      {"op": "add", "path": "/spec/gates", "value": []},
      {"op": "add", "path": "/spec/nodeSelector", "value": {"k": "v"}}])"));

  SECTION("applied twice, it changes nothing more") {
    const json once = applyPatch(from, patch);
    CHECK(applyPatch(once, patch) == once);
  }
  SECTION("equal documents give an empty patch") {
    CHECK(JsonPatch::between(to, to).empty());
  }
  SECTION("an array element of another type is replaced, never inserted before") {
    const json a = json::parse(R"({"l": [1, {"x": 1}, 3]})");
    const json b = json::parse(R"({"l": [1, "two", 3]})");
    const JsonPatch elementPatch = JsonPatch::between(a, b);
    CHECK(elementPatch.toJson() ==
          json::parse(R"([{"op": "replace", "path": "/l/1", "value": "two"}])"));
    CHECK(applyPatch(a, elementPatch) == b);
  }
  SECTION("a different root is replaced whole") {
    CHECK(applyPatch(json::array({1}), JsonPatch::between(json::array({1}), json("s"))) == "s");
  }
}
