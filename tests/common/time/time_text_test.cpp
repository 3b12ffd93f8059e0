// Kubernetes' time text: parsed in every form RFC 3339 allows, written as metav1.Time is.
#include "common/time/time_text.h"

#include <catch2/catch.hpp>

using namespace gvirtus;
using namespace std::chrono;

TEST_CASE("RFC 3339 times", "[time]") {
  const auto base = sys_days(year(2026) / 11 / 22) + hours(10);
  CHECK(parseRfc3339("2026-11-22T10:00:00Z").value() == base);
  CHECK(parseRfc3339("2026-11-22T10:00:00.250Z").value() == base + milliseconds(250));
  CHECK(parseRfc3339("2026-11-22T12:00:00+02:00").value() == base);
  CHECK(parseRfc3339("2026-11-22T09:30:00-00:30").value() == base);
  for (const char* text :
       {"2026-11-22", "2026-11-22T10:00:00", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z",
        "2026-11-22T10:00:00.Z", "2026-11-22T10:00:00+2:00", "2026-11-22 10:00:00Z"}) {
    INFO(text);
    CHECK_FALSE(parseRfc3339(text).has_value());
  }
}

TEST_CASE("times are written in UTC to the second, and read back", "[time]") {
  const auto base = sys_days(year(2026) / 11 / 22) + hours(10) + minutes(5) + seconds(7);
  CHECK(formatRfc3339(system_clock::time_point(base)) == "2026-11-22T10:05:07Z");
  CHECK(formatRfc3339(system_clock::time_point(base) + milliseconds(999)) ==
        "2026-11-22T10:05:07Z");
  CHECK(parseRfc3339(formatRfc3339(system_clock::time_point(base))).value() == base);
}
