#include "common/json_reader.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

using gvirtus::readJson;
using nlohmann::json;

namespace {

// nlohmann's verdict on `text`: the value, or discarded when it refuses it.
json nlohmannRead(const std::string& text) {
  return json::parse(text, nullptr, false);
}

// Same acceptance as nlohmann, an equal value of the same types, and the same text back.
void requireAsNlohmann(const std::string& text) {
  INFO("text: " << text);
  const json expected = nlohmannRead(text);
  auto ours = readJson(text);
  REQUIRE(ours.has_value() == !expected.is_discarded());
  if (ours) {
    REQUIRE(*ours == expected);
    REQUIRE(ours->dump() == expected.dump());
  }
}

}  // namespace

TEST_CASE("the JSON reader reads what nlohmann reads, to equal values", "[json-reader]") {
  for (const std::string& text : std::vector<std::string>{
           R"({})",
           R"([])",
           R"( { "a" : [ 1 , -2 , 3.5 , true , false , null , "x" ] } )",
           "\t\r\n[\n]\n",
           R"({"kind":"AdmissionReview","request":{"uid":"u","object":{"metadata":{}}}})",
           R"("plain")",
           R"("escapes \" \\ \/ \b \f \n \r \t")",
           R"("\u0041\u00e9\u20ac\ud83d\ude00\u0000")",
           "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\"",
           R"(0)",
           R"(-0)",
           R"(-0.0)",
           R"(1e2)",
           R"(1E+2)",
           R"(1.5e-3)",
           R"(9223372036854775807)",
           R"(-9223372036854775808)",
           R"(-9223372036854775809)",  // below int64: a double
           R"(18446744073709551615)",
           R"(18446744073709551616)",  // above uint64: a double
           R"(1e-400)",                // underflow: zero, as strtod gives
           R"(123456789012345678901234567890)",
           R"({"a":1,"a":2})",  // a repeated member keeps its last value
           R"({"b":1,"a":{"c":[{}]},"a":[]})",
           "\xEF\xBB\xBF{}",  // a byte order mark before the value
       }) {
    requireAsNlohmann(text);
  }
}

TEST_CASE("the JSON reader refuses what nlohmann refuses", "[json-reader]") {
  for (const std::string& text : std::vector<std::string>{
           std::string(),
           std::string(" "),
           std::string("{"),
           std::string("{\"a\"}"),
           std::string("{\"a\":}"),
           std::string("{\"a\":1,}"),
           std::string("[1,]"),
           std::string("[1 2]"),
           std::string("{a:1}"),
           std::string("'a'"),
           std::string("01"),
           std::string("-"),
           std::string("1."),
           std::string(".5"),
           std::string("1e"),
           std::string("+1"),
           std::string("1e400"),
           std::string("-1e400"),
           std::string("NaN"),
           std::string("tru"),
           std::string("nul"),
           std::string("truex"),
           std::string("{} {}"),
           std::string("\"open"),
           std::string("\"tab\there\""),
           std::string("\"\\x\""),
           std::string("\"\\u12\""),
           std::string("\"\\ud800\""),
           std::string("\"\\ud800\\u0041\""),
           std::string("\"\\udc00\""),
           std::string("\"\xff\""),
           std::string("\"\xc0\xaf\""),          // overlong
           std::string("\"\xed\xa0\x80\""),      // a surrogate in UTF-8
           std::string("\"\xf4\x90\x80\x80\""),  // above U+10FFFF
           std::string("\"\xe2\x82\""),          // cut short
       }) {
    requireAsNlohmann(text);
    REQUIRE_FALSE(readJson(text).has_value());
  }
}

TEST_CASE("the JSON reader refuses a NUL byte after the value, which ends nlohmann's text",
          "[json-reader]") {
  const std::string text("[1]\0[2]", 7);
  REQUIRE_FALSE(nlohmannRead(text).is_discarded());
  REQUIRE_FALSE(readJson(text).has_value());
}

TEST_CASE("the JSON reader's error names the byte where the text went wrong", "[json-reader]") {
  auto result = readJson(R"({"a": [1, 2,, 3]})");
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().message == "invalid JSON at byte 12: expected a JSON value");
}

TEST_CASE("the JSON reader refuses documents nested deeper than its limit", "[json-reader]") {
  const std::string deep = std::string(20, '[') + std::string(20, ']');
  REQUIRE(readJson(deep, 20).has_value());
  auto refused = readJson(deep, 19);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().message.find("nested deeper than 19 levels") != std::string::npos);
  // The default limit holds a deep document off the stack without a crash.
  const std::string deeper = std::string(100'000, '[') + std::string(100'000, ']');
  REQUIRE_FALSE(readJson(deeper).has_value());
}

TEST_CASE("the JSON reader agrees with nlohmann on mutated documents", "[json-reader]") {
  // Random byte edits of a pod-like document: each text, valid or not, is judged alike.
  const std::string seed =
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p-0","labels":{"gvirtus.io/enabled":"true"},)"
      R"("annotations":{"a":"caf\u00e9 \ud83d\ude00"}},"spec":{"containers":[{"name":"app","image":"x",)"
      R"("resources":{"limits":{"cpu":"1"}},"ports":[{"containerPort":8080}]}],"priority":-12,)"
      R"("ratio":0.25,"big":1e30,"none":null,"yes":true}})";
  const std::string alphabet =
      "{}[]\":,\\ -+.eE0123456789tfnu\xc3\xa9\xff\x01"
      "abc";
  std::mt19937 random(7);
  for (int round = 0; round < 5000; ++round) {
    std::string text = seed;
    const int edits = 1 + static_cast<int>(random() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = random() % text.size();
      const char c = alphabet[random() % alphabet.size()];
      switch (random() % 3) {
        case 0:
          text[at] = c;
          break;
        case 1:
          text.insert(at, 1, c);
          break;
        default:
          text.erase(at, 1);
          break;
      }
    }
    requireAsNlohmann(text);
  }
}
