#include "common/json_text.h"

#include <catch2/catch.hpp>
#include <random>

using gvirtus::compactJson;
using nlohmann::json;

namespace {

std::string nlohmannText(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

TEST_CASE("compact JSON text is byte for byte nlohmann's", "[json-text]") {
  std::string controls;
  for (int c = 0; c < 0x20; ++c) {
    controls += static_cast<char>(c);
  }
  const std::vector<json> cases = {
      json::object(),
      json::array(),
      nullptr,
      true,
      false,
      0,
      -1,
      std::numeric_limits<int64_t>::min(),
      std::numeric_limits<uint64_t>::max(),
      0.5,
      1e300,
      -0.0,
      "",
      "plain text / with a slash",
      "quote \" backslash \\ and DEL \x7f",
      controls,
      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",  // UTF-8
      std::string("bad \xff\xfe utf-8 \xc3"),       // replaced as nlohmann does
      json::parse(R"({"b":[1,{"z":null,"a":"x\ny"}],"a":{"":[]},"~/":"k"})"),
      json::parse(R"([{"op":"add","path":"/metadata/annotations/gvirtus.io~1properties",
        "value":"{\"communicator\":[{\"endpoint\":{\"port\":\"9999\"}}]}"}])"),
  };
  for (const auto& value : cases) {
    INFO(nlohmannText(value));
    CHECK(compactJson(value) == nlohmannText(value));
  }
  // An escape or a byte above 0x7f at every place of strings either side of 8 and 16 bytes
  // (the writer skips plain bytes eight at a time).
  for (const char* special : {"\"", "\n", "\x01", "\xc3\xa9"}) {
    for (size_t size = 1; size <= 18; ++size) {
      for (size_t at = 0; at < size; ++at) {
        std::string text(size, 'a');
        text.replace(at, 1, special);
        INFO(size << " " << at);
        CHECK(compactJson(text) == nlohmannText(text));
      }
    }
  }
}

TEST_CASE("compact JSON text matches nlohmann's on random documents", "[json-text]") {
  std::mt19937 random(20261125);
  auto pick = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  auto text = [&] {
    std::string s;
    for (int i = pick(12); i > 0; --i) {
      const int kind = pick(10);
      s += kind < 6   ? static_cast<char>('a' + pick(26))
           : kind < 8 ? static_cast<char>(pick(0x80))
                      : static_cast<char>(0x80 + pick(0x80));
    }
    return s;
  };
  std::function<json(int)> document = [&](int depth) -> json {
    switch (depth > 3 ? pick(5) : pick(7)) {
      case 0:
        return text();
      case 1:
        return static_cast<int64_t>(random()) - 0x7fffffff;
      case 2:
        return pick(2) == 0;
      case 3:
        return nullptr;
      case 4:
        return static_cast<double>(random()) / 7.0;
      case 5: {
        json object = json::object();
        for (int i = pick(5); i > 0; --i) {
          object[text()] = document(depth + 1);
        }
        return object;
      }
      default: {
        json array = json::array();
        for (int i = pick(5); i > 0; --i) {
          array.push_back(document(depth + 1));
        }
        return array;
      }
    }
  };
  for (int i = 0; i < 2000; ++i) {
    const json value = document(0);
    INFO(nlohmannText(value));
    REQUIRE(compactJson(value) == nlohmannText(value));
  }
}
