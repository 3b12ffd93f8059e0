#include "common/contract/gvirtus_properties.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace gvirtus;
using nlohmann::json;

TEST_CASE("properties.json has the GVirtuS shape with string values", "[properties]") {
  auto text = renderProperties("10.1.2.3", 9999, defaultPlugins());
  REQUIRE(text.has_value());
  CHECK(
      *text ==
      R"({"communicator":[{"endpoint":{"suite":"tcp/ip","protocol":"tcp","server_address":"10.1.2.3","port":"9999"},"plugins":["cudart","cublas","curand","cudnn","cufft","cusolver","cusparse","nvrtc","cuda","nvml"]}],"secure_application":false})");
  const json doc = json::parse(*text);
  CHECK(doc["communicator"].size() == 1);
  CHECK(doc["communicator"][0]["endpoint"]["port"].is_string());
  CHECK(doc["secure_application"] == false);
}

TEST_CASE("properties.json takes other plugin lists", "[properties]") {
  auto text = renderProperties("192.168.0.1", 8888, {"cudart"});
  REQUIRE(text.has_value());
  const json doc = json::parse(*text);
  CHECK(doc["communicator"][0]["plugins"] == json::array({"cudart"}));
  CHECK(doc["communicator"][0]["endpoint"]["port"] == "8888");
}

TEST_CASE("server_address must be a dotted IPv4 address", "[properties]") {
  for (const char* address : {"backend.gvirtus-system.svc", "::1", "10.1.2", "010.1.2.3", ""}) {
    INFO(address);
    auto text = renderProperties(address, 9999, defaultPlugins());
    REQUIRE_FALSE(text.has_value());
    CHECK(text.error().message.find("dotted IPv4") != std::string::npos);
  }
  CHECK_FALSE(renderProperties("10.1.2.3", 0, defaultPlugins()).has_value());
  CHECK_FALSE(renderProperties("10.1.2.3", 65536, defaultPlugins()).has_value());
}

TEST_CASE("the properties cache renders each backend once, the same text", "[properties]") {
  PropertiesCache cache({"cudart"});
  auto first = cache.forBackend("10.0.0.1", 9999);
  REQUIRE(first.has_value());
  CHECK(*first == *renderProperties("10.0.0.1", 9999, {"cudart"}));
  CHECK(*cache.forBackend("10.0.0.1", 9999) == *first);
  CHECK(*cache.forBackend("10.0.0.2", 9999) == *renderProperties("10.0.0.2", 9999, {"cudart"}));
  CHECK_FALSE(cache.forBackend("backend.example", 9999).has_value());
  for (int i = 0; i < 1100; ++i) {  // past its bound it starts over, still right
    REQUIRE(
        cache.forBackend("10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256), 9999)
            .has_value());
  }
  CHECK(*cache.forBackend("10.0.0.1", 9999) == *first);
}
