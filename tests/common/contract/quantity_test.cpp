#include "common/contract/quantity.h"

#include <catch2/catch.hpp>

using namespace gvirtus;

TEST_CASE("quantities in binary, decimal and exponent forms", "[quantity]") {
  CHECK(parseQuantity("16Gi").value() == 16.0 * 1024 * 1024 * 1024);
  CHECK(parseQuantity("512Mi").value() == 512.0 * 1024 * 1024);
  CHECK(parseQuantity("1Ki").value() == 1024);
  CHECK(parseQuantity("500M").value() == 500e6);
  CHECK(parseQuantity("1.5G").value() == Approx(1.5e9));
  CHECK(parseQuantity("100m").value() == Approx(0.1));
  CHECK(parseQuantity("12e3").value() == Approx(12000));
  CHECK(parseQuantity("12E-1").value() == Approx(1.2));
  CHECK(parseQuantity("+2").value() == 2);
  CHECK(parseQuantity("-2k").value() == -2000);
  CHECK(parseQuantity(".5Gi").value() == 0.5 * 1024 * 1024 * 1024);
  CHECK(parseQuantity("3.").value() == 3);
}

TEST_CASE("bad quantities are one-line errors quoting the text", "[quantity]") {
  for (const char* text :
       {"", "Gi", "16 Gi", "16GB", "16gi", "1.2.3", "e3", "1e", "1e+", "--1", "1Gix", "0x10"}) {
    INFO(text);
    auto q = parseQuantity(text);
    REQUIRE_FALSE(q.has_value());
    CHECK(q.error().message.find(std::string("\"") + text + "\"") != std::string::npos);
  }
}

TEST_CASE("quantities beyond a double are refused, never infinite or NaN", "[quantity]") {
  // 00e390 (found by quantity_fuzz) is 0 times infinity.
  for (const std::string& text : {std::string("00e390"), std::string("1e999"),
                                  std::string(400, '9'), std::string(400, '9') + "Ki"}) {
    INFO(text.substr(0, 20));
    auto q = parseQuantity(text);
    REQUIRE_FALSE(q.has_value());
    CHECK_THAT(q.error().message, Catch::Contains("out of range"));
    CHECK_FALSE(parseMemoryMiB(text).has_value());
  }
}

TEST_CASE("memory in MiB rounds up and refuses negatives", "[quantity]") {
  CHECK(parseMemoryMiB("16Gi").value() == 16384);
  CHECK(parseMemoryMiB("1M").value() == 1);
  CHECK(parseMemoryMiB("0").value() == 0);
  CHECK(parseMemoryMiB("1048577").value() == 2);
  CHECK_FALSE(parseMemoryMiB("-1Gi").has_value());
  CHECK_FALSE(parseMemoryMiB("1e300").has_value());
}
