#include "backend-shim/peers/refusal_log.h"

#include <catch2/catch.hpp>

using namespace gvirtus::backend_shim;
using namespace std::chrono_literals;

TEST_CASE("refusal log: one line per address per interval, with the count left out",
          "[refusal_log]") {
  RefusalLog log(10s);
  const auto t0 = RefusalLog::Clock::time_point{} + 1h;
  CHECK(log.admit("10.0.0.9", t0) == std::optional<int64_t>(0));
  CHECK_FALSE(log.admit("10.0.0.9", t0 + 1s).has_value());
  CHECK_FALSE(log.admit("10.0.0.9", t0 + 9s).has_value());
  // Another address has its own first line.
  CHECK(log.admit("10.0.0.8", t0 + 9s) == std::optional<int64_t>(0));
  CHECK(log.admit("10.0.0.9", t0 + 10s) == std::optional<int64_t>(2));
  CHECK_FALSE(log.admit("10.0.0.9", t0 + 11s).has_value());
  CHECK(log.admit("10.0.0.9", t0 + 60s) == std::optional<int64_t>(1));
}

TEST_CASE("refusal log: the addresses remembered are bounded", "[refusal_log]") {
  RefusalLog log(10s, 2);
  const auto t0 = RefusalLog::Clock::time_point{} + 1h;
  CHECK(log.admit("a", t0).has_value());
  CHECK(log.admit("b", t0 + 5s).has_value());
  // Full: "a" is quiet for an interval and is forgotten, "b" is kept.
  CHECK(log.admit("c", t0 + 12s).has_value());
  CHECK_FALSE(log.admit("b", t0 + 13s).has_value());
  // Full of recent ones: the memory starts over rather than grow.
  CHECK(log.admit("d", t0 + 13s).has_value());
  CHECK(log.admit("b", t0 + 14s).has_value());
}
