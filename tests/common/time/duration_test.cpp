#include "common/time/duration.h"

#include <catch2/catch.hpp>

using gvirtus::Duration;
using gvirtus::formatDuration;
using gvirtus::parseDuration;
using namespace std::chrono_literals;

TEST_CASE("parseDuration reads Kubernetes-style durations", "[duration]") {
  CHECK(parseDuration("500ms") == Duration(500ms));
  CHECK(parseDuration("2s") == Duration(2s));
  CHECK(parseDuration("1m") == Duration(1min));
  CHECK(parseDuration("1h") == Duration(1h));
  CHECK(parseDuration("1h30m") == Duration(90min));
  CHECK(parseDuration("1m30s") == Duration(90s));
  CHECK(parseDuration("1.5s") == Duration(1500ms));
  CHECK(parseDuration(".5s") == Duration(500ms));
  CHECK(parseDuration("0s") == Duration(0ms));
  CHECK(parseDuration("0") != Duration(0ms));  // a unit is required, even for zero
  CHECK(parseDuration("2h45m10s500ms") == Duration(2h + 45min + 10s + 500ms));
  CHECK(parseDuration("1.0005s") == Duration(1001ms));  // rounded to the millisecond
}

TEST_CASE("parseDuration rejects what is not a duration", "[duration]") {
  for (const char* text : {"", "5", "s", "ms", "-1s", "+1s", "1d", "1sec", "1 s", " 1s", "1s ",
                           "1S", "1e3s", "abc", "1s2", "1.2.3s", "1..5s", ".s"}) {
    INFO(text);
    auto d = parseDuration(text);
    CHECK_FALSE(d);
    if (!d) {
      CHECK_FALSE(d.error().message.empty());
    }
  }
  CHECK_THAT(parseDuration("5").error().message, Catch::Contains("unit"));
  CHECK_THAT(parseDuration("1d").error().message, Catch::Contains("\"1d\""));
  CHECK_THAT(parseDuration("99999999999h").error().message, Catch::Contains("too large"));
}

TEST_CASE("formatDuration writes the shortest Kubernetes-style text", "[duration]") {
  CHECK(formatDuration(0ms) == "0s");
  CHECK(formatDuration(1ms) == "1ms");
  CHECK(formatDuration(500ms) == "500ms");
  CHECK(formatDuration(1s) == "1s");
  CHECK(formatDuration(1500ms) == "1.5s");
  CHECK(formatDuration(1001ms) == "1.001s");
  CHECK(formatDuration(59999ms) == "59.999s");
  CHECK(formatDuration(60s) == "1m");
  CHECK(formatDuration(90s) == "1m30s");
  CHECK(formatDuration(1h) == "1h");
  CHECK(formatDuration(1h + 30min) == "1h30m");
  CHECK(formatDuration(25h + 1s) == "25h1s");
  CHECK(formatDuration(-1500ms) == "-1.5s");
}

TEST_CASE("formatDuration and parseDuration round-trip", "[duration]") {
  for (int64_t ms : {0LL, 1LL, 999LL, 1000LL, 1001LL, 59'999LL, 60'000LL, 61'001LL, 3'599'999LL,
                     3'600'000LL, 3'600'500LL, 90'061'001LL}) {
    INFO(ms);
    const Duration d(ms);
    auto back = parseDuration(formatDuration(d));
    REQUIRE(back);
    CHECK(*back == d);
  }
}
