#include "webhook/placement/static_source.h"

#include <catch2/catch.hpp>
#include <map>
#include <mutex>

#include "support/eventually.h"

using namespace gvirtus::webhook;

TEST_CASE("static-backends items", "[static-backends]") {
  auto specs = parseStaticBackends({"10.0.0.1:9999", "gpu-a.example.com:8888"});
  REQUIRE(specs.has_value());
  CHECK(*specs == std::vector<StaticBackendSpec>{{"10.0.0.1", 9999}, {"gpu-a.example.com", 8888}});
  for (const char* bad :
       {"10.0.0.1", ":9999", "10.0.0.1:0", "10.0.0.1:x", "[::1]:9999", "fe80::1:9999", "a b:1"}) {
    INFO(bad);
    auto r = parseStaticBackends({bad});
    REQUIRE_FALSE(r.has_value());
    CHECK_THAT(r.error().message, Catch::Contains(std::string("\"") + bad + "\""));
  }
}

TEST_CASE("host names resolve to one backend per IPv4 address, failures keep the last",
          "[static-backends]") {
  std::mutex mutex;
  std::map<std::string, gvirtus::Result<std::vector<std::string>>> answers = {
      {"gpu.example.com", std::vector<std::string>{"192.0.2.1", "192.0.2.2"}},
      {"10.0.0.1", std::vector<std::string>{"10.0.0.1"}}};
  int calls = 0;
  StaticBackendSource source(
      {{"gpu.example.com", 9999}, {"10.0.0.1", 7777}},
      [&](const std::string& host) {
        std::lock_guard lock(mutex);
        ++calls;
        return answers.at(host);
      },
      std::chrono::hours(1));
  int changes = 0;
  source.setOnChange([&] { ++changes; });
  CHECK_FALSE(source.ready());
  source.start();
  CHECK(source.ready());
  CHECK(changes == 1);
  auto backends = *source.backends();
  REQUIRE(backends.size() == 3);
  CHECK(backends[0].endpoint() == "192.0.2.1:9999");
  CHECK(backends[1].endpoint() == "192.0.2.2:9999");
  CHECK(backends[2].endpoint() == "10.0.0.1:7777");
  CHECK(backends[0].podRef().empty());
  CHECK_FALSE(backends[0].load.has_value());

  {
    std::lock_guard lock(mutex);
    answers.at("gpu.example.com") = gvirtus::fail("timeout");
  }
  source.resolveAll();
  CHECK(source.backends()->size() == 3);
  CHECK(changes == 1);

  {
    std::lock_guard lock(mutex);
    answers.at("gpu.example.com") = std::vector<std::string>{"192.0.2.3"};
  }
  source.resolveAll();
  backends = *source.backends();
  REQUIRE(backends.size() == 2);
  CHECK(backends[0].endpoint() == "192.0.2.3:9999");
  CHECK(changes == 2);
  // An IPv4 literal is not asked again.
  std::lock_guard lock(mutex);
  CHECK(calls == 4);
  source.stop();
}

TEST_CASE("static backends are re-resolved on their period", "[static-backends]") {
  std::atomic<int> calls = 0;
  StaticBackendSource source(
      {{"gpu.example.com", 9999}},
      [&](const std::string&) -> gvirtus::Result<std::vector<std::string>> {
        ++calls;
        return std::vector<std::string>{"192.0.2." + std::to_string(calls.load())};
      },
      std::chrono::milliseconds(20));
  source.start();
  CHECK(gvirtus::testing::eventually([&] { return calls >= 3; }, std::chrono::seconds(5)));
  source.stop();
}
