#include "common/base/json_patch.h"

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
