#include "common/kube/watch_stream.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace gvirtus {
namespace {

// Three events as the API server sends them: one JSON object per line.
const std::string kBody =
    R"({"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"1"}}})"
    "\n"
    R"({"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"2"},"data":"caf\u00e9 \u2603 {\"x\":\"}\n\"}"}})"
    "\n"
    R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"3"}}})"
    "\n";

std::vector<std::string> feedAll(WatchStream& stream, const std::vector<std::string>& chunks) {
  std::vector<std::string> lines;
  for (const auto& chunk : chunks) {
    for (auto& line : stream.feed(chunk)) {
      lines.push_back(std::move(line));
    }
  }
  return lines;
}

TEST_CASE("watch stream splits lines", "[watch_stream]") {
  WatchStream stream;
  auto lines = stream.feed(kBody);
  REQUIRE(lines.size() == 3);
  CHECK(stream.pending() == 0);
  auto first = parseWatchEvent(lines[0]);
  REQUIRE(first.has_value());
  CHECK(first->type == "ADDED");
  CHECK(first->object["metadata"]["name"] == "a");
  auto second = parseWatchEvent(lines[1]);
  REQUIRE(second.has_value());
  CHECK(second->object["data"] == "caf\u00e9 \u2603 {\"x\":\"}\n\"}");
  auto third = parseWatchEvent(lines[2]);
  REQUIRE(third.has_value());
  CHECK(third->type == "BOOKMARK");
}

TEST_CASE("watch stream cut at every byte boundary gives the same events", "[watch_stream]") {
  WatchStream whole;
  const auto expected = whole.feed(kBody);
  REQUIRE(expected.size() == 3);
  for (size_t cut = 0; cut <= kBody.size(); ++cut) {
    WatchStream stream;
    auto lines = feedAll(stream, {kBody.substr(0, cut), kBody.substr(cut)});
    INFO("cut at " << cut);
    REQUIRE(lines == expected);
    REQUIRE(stream.pending() == 0);
  }
  // Two cuts, and one byte at a time.
  for (size_t a = 0; a <= kBody.size(); a += 7) {
    for (size_t b = a; b <= kBody.size(); b += 11) {
      WatchStream stream;
      auto lines = feedAll(stream, {kBody.substr(0, a), kBody.substr(a, b - a), kBody.substr(b)});
      REQUIRE(lines == expected);
    }
  }
  WatchStream bytes;
  std::vector<std::string> single;
  for (char c : kBody) {
    single.emplace_back(1, c);
  }
  CHECK(feedAll(bytes, single) == expected);
}

TEST_CASE("watch stream holds a partial line", "[watch_stream]") {
  WatchStream stream;
  CHECK(stream.feed(R"({"type":"ADD)").empty());
  CHECK(stream.pending() == 12);
  auto lines = stream.feed("ED\",\"object\":{}}\r\n\n  \r\n{\"type\"");
  REQUIRE(lines.size() == 1);  // CR stripped, blank lines skipped
  CHECK(lines[0] == R"({"type":"ADDED","object":{}})");
  CHECK(stream.pending() == 7);
}

TEST_CASE("watch stream refuses a line over the limit", "[watch_stream]") {
  WatchStream stream;
  std::string chunk(1024 * 1024, 'x');
  for (size_t i = 0; i < WatchStream::kMaxLineBytes / chunk.size(); ++i) {
    REQUIRE(stream.feed(chunk).empty());
  }
  CHECK_FALSE(stream.overflowed());
  CHECK(stream.feed("y").empty());
  CHECK(stream.overflowed());
  CHECK(stream.pending() == 0);
  CHECK(stream.feed("\n{}\n").empty());  // the stream stays broken
}

TEST_CASE("parseWatchEvent errors", "[watch_stream]") {
  auto notJson = parseWatchEvent("{not json");
  REQUIRE_FALSE(notJson.has_value());
  CHECK(notJson.error().message.starts_with("watch event is not JSON: "));
  CHECK(parseWatchEvent("[1,2]").error().message == "watch event is not a JSON object");
  CHECK(parseWatchEvent(R"({"object":{}})").error().message == "watch event has no type");
  CHECK(parseWatchEvent(R"({"type":"ADDED","object":"x"})").error().message ==
        "watch event ADDED has no object");
}

TEST_CASE("watchErrorOf reads the Status of an ERROR event", "[watch_stream]") {
  auto expired = parseWatchEvent(
      R"json({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",)json"
      R"json("message":"too old resource version: 1 (5)","reason":"Expired","code":410}})json");
  REQUIRE(expired.has_value());
  Error error = watchErrorOf(*expired);
  CHECK(error.isGone());
  CHECK(error.reason == "Expired");
  CHECK(error.message == "watch error 410 Expired: too old resource version: 1 (5)");

  // Without a code, Expired still means 410.
  Error noCode = watchErrorOf(WatchEvent{"ERROR", {{"reason", "Expired"}, {"message", "old"}}});
  CHECK(noCode.httpStatus == 410);

  Error internal = watchErrorOf(
      WatchEvent{"ERROR", {{"code", 500}, {"reason", "InternalError"}, {"message", "etcd down"}}});
  CHECK(internal.httpStatus == 500);
  CHECK_FALSE(internal.isGone());
  CHECK(internal.message == "watch error 500 InternalError: etcd down");

  Error bare = watchErrorOf(WatchEvent{"ERROR", nlohmann::json::object()});
  CHECK(bare.httpStatus == 0);
  CHECK(bare.message == "watch error: no details");
}

}  // namespace
}  // namespace gvirtus
