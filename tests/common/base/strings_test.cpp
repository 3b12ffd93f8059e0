#include "common/base/strings.h"

#include <catch2/catch.hpp>

using gvirtus::splitList;
using gvirtus::trim;
using Items = std::vector<std::string>;

TEST_CASE("trim takes whitespace off both ends only", "[strings]") {
  CHECK(trim("  a b \t\r\n") == "a b");
  CHECK(trim("a") == "a");
  CHECK(trim(" \t\n").empty());
  CHECK(trim("").empty());
}

TEST_CASE("a list is split, trimmed and rid of empty items", "[strings]") {
  CHECK(splitList("a, b ,,c") == Items{"a", "b", "c"});
  CHECK(splitList(" a ") == Items{"a"});
  CHECK(splitList("").empty());
  CHECK(splitList(" , ,").empty());
  CHECK(splitList("a,a") == Items{"a", "a"});  // duplicates are the caller's to judge
  CHECK(splitList("x=1;y=2", ';') == Items{"x=1", "y=2"});
}

TEST_CASE("a non-negative integer is the whole text, without a sign", "[strings]") {
  CHECK(gvirtus::parseNonNegative("0") == 0);
  CHECK(gvirtus::parseNonNegative("16") == 16);
  for (const char* bad : {"", "-1", "-0", "+1", "1.5", "16 ", " 16", "x", "99999999999999999999"}) {
    INFO(bad);
    CHECK_FALSE(gvirtus::parseNonNegative(bad).has_value());
  }
}
