// Reading fields of objects that may lack them, or hold another type.
#include "common/base/json_access.h"

#include <catch2/catch.hpp>

using gvirtus::member;
using gvirtus::memberAt;
using gvirtus::stringAt;
using nlohmann::json;

TEST_CASE("members along a path, absent where the path breaks", "[json]") {
  const json pod = json::parse(
      R"({"metadata":{"name":"p","labels":{"app":"x"},"generation":3},"spec":["not","an","object"]})");
  REQUIRE(member(pod, "metadata") != nullptr);
  CHECK(member(pod, "status") == nullptr);
  CHECK(member(json::array(), "metadata") == nullptr);
  CHECK(memberAt(pod, {"metadata", "labels", "app"})->get<std::string>() == "x");
  CHECK(memberAt(pod, {}) == &pod);
  CHECK(memberAt(pod, {"spec", "containers"}) == nullptr);
  CHECK(stringAt(pod, {"metadata", "name"}) == "p");
  CHECK(stringAt(pod, {"metadata", "generation"}).empty());  // a number is no string
  CHECK(stringAt(pod, {"metadata", "labels", "missing"}).empty());
  CHECK(stringAt(json(), {"metadata"}).empty());
}

TEST_CASE("writing along a path makes what is missing and keeps what is there", "[json]") {
  json pod = json::parse(R"({"metadata":{"labels":{"app":"x"},"annotations":null},
                             "spec":{"volumes":"not an array"}})");
  gvirtus::objectAt(pod, {"metadata", "labels"})["tier"] = "gpu";
  CHECK(pod["metadata"]["labels"] == json({{"app", "x"}, {"tier", "gpu"}}));
  gvirtus::objectAt(pod, {"metadata", "annotations"})["a"] = "1";
  CHECK(pod["metadata"]["annotations"] == json({{"a", "1"}}));
  gvirtus::arrayAt(pod, {"spec", "volumes"}).push_back("v");
  CHECK(pod["spec"]["volumes"] == json::array({"v"}));
  gvirtus::arrayAt(pod, {"spec", "affinity", "terms"}).push_back(1);
  CHECK(pod["spec"]["affinity"] == json({{"terms", {1}}}));
  json scalar = 3;
  gvirtus::objectAt(scalar, {"a"});
  CHECK(scalar == json({{"a", json::object()}}));
}

TEST_CASE("text to JSON: errors as values that say where the text went wrong", "[json]") {
  auto parsed = gvirtus::parseJson(R"({"a": [1, 2,, 3]})");
  REQUIRE_FALSE(parsed.has_value());
  CHECK_THAT(parsed.error().message, Catch::Contains("column 13"));
  CHECK_FALSE(gvirtus::parseJson(R"({"a": 1} trailing)").has_value());
  CHECK_FALSE(gvirtus::parseJson("").has_value());
  // nlohmann throws out_of_range, not parse_error, for these: still an error, never thrown.
  CHECK_FALSE(gvirtus::parseJson(R"({"sessions": 1e400})").has_value());
  CHECK_FALSE(gvirtus::parseJson("-1e400").has_value());
  CHECK(gvirtus::parseJson(R"( {"a": [1, "x", null]} )").value() == json{{"a", {1, "x", nullptr}}});
  // Deep nesting is read without recursion: a hostile depth costs heap, not the stack.
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  CHECK(gvirtus::parseJson(deep).has_value());
}

TEST_CASE("JSON to text: compact, and a tenant's bad UTF-8 is replaced, not thrown on", "[json]") {
  CHECK(gvirtus::compactJson(json{{"b", 1}, {"a", "x\n"}}) == R"({"a":"x\n","b":1})");
  CHECK(gvirtus::compactJson(json("bad \xff byte")) == "\"bad \xEF\xBF\xBD byte\"");
}
