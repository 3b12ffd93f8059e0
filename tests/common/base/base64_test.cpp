// Standard base64 (RFC 4648) over OpenSSL, strict about what it reads.
#include "common/base/base64.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>

using gvirtus::base64Decode;
using gvirtus::base64Encode;

TEST_CASE("base64 round trips and matches RFC 4648 vectors", "[base64]") {
  for (auto [plain, encoded] : {std::pair{"", ""}, std::pair{"f", "Zg=="}, std::pair{"fo", "Zm8="},
                                std::pair{"foo", "Zm9v"}, std::pair{"foob", "Zm9vYg=="},
                                std::pair{"fooba", "Zm9vYmE="}, std::pair{"foobar", "Zm9vYmFy"}}) {
    CHECK(base64Encode(plain) == encoded);
    CHECK(base64Decode(encoded).value() == plain);
  }
  std::string bytes;
  for (int i = 0; i < 256; ++i) {
    bytes += static_cast<char>(i);
  }
  CHECK(base64Decode(base64Encode(bytes)).value() == bytes);
  CHECK(base64Decode("Zm9v\nYmFy").value() == "foobar");
  CHECK_FALSE(base64Decode("Zm9").has_value());
  CHECK_FALSE(base64Decode("Zm=v").has_value());
  CHECK_FALSE(base64Decode("Zm9v!").has_value());
}

TEST_CASE("base64 round trips at every length", "[base64]") {
  std::mt19937 random(11);
  for (std::size_t size = 0; size < 300; ++size) {
    std::string bytes(size, '\0');
    for (char& c : bytes) {
      c = static_cast<char>(random());
    }
    const std::string encoded = base64Encode(bytes);
    INFO("size " << size);
    REQUIRE(encoded.size() == 4 * ((size + 2) / 3));
    REQUIRE(base64Decode(encoded).value() == bytes);
  }
}

TEST_CASE("base64 refuses padding anywhere but at the end", "[base64]") {
  CHECK_FALSE(base64Decode("Zg==Zm9v").has_value());
  CHECK_FALSE(base64Decode("Z===").has_value());
  CHECK_FALSE(base64Decode("====").has_value());
  CHECK(base64Decode(" Zm8= ").value() == "fo");
  CHECK(base64Decode("").value().empty());
}
