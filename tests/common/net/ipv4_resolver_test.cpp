#include "common/net/ipv4_resolver.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "support/test_dns_server.h"

using gvirtus::Ipv4Resolver;
using gvirtus::Ipv4ResolverOptions;
using gvirtus::test::TestDnsServer;
using namespace std::chrono_literals;

namespace {

std::map<std::string, TestDnsServer::Records> testZone() {
  return {
      {"two.gvirtus.test", {.a = {"10.0.0.1", "10.0.0.2"}, .aaaa = {}}},
      {"v6only.gvirtus.test", {.a = {}, .aaaa = {"fd00::1"}}},
      {"silent.gvirtus.test", {.a = {}, .aaaa = {}, .drop = true}},
  };
}

std::unique_ptr<Ipv4Resolver> makeResolver(const TestDnsServer& server,
                                           gvirtus::Duration timeout = 2s, int tries = 2) {
  auto resolver = Ipv4Resolver::create(
      Ipv4ResolverOptions{.servers = {server.address()}, .timeout = timeout, .tries = tries});
  REQUIRE(resolver);
  return std::move(*resolver);
}

}  // namespace

TEST_CASE("isDottedIpv4 accepts dotted quads only", "[ipv4_resolver]") {
  CHECK(gvirtus::isDottedIpv4("10.1.2.3"));
  CHECK(gvirtus::isDottedIpv4("0.0.0.0"));
  CHECK(gvirtus::isDottedIpv4("255.255.255.255"));
  CHECK_FALSE(gvirtus::isDottedIpv4(""));
  CHECK_FALSE(gvirtus::isDottedIpv4("256.1.1.1"));
  CHECK_FALSE(gvirtus::isDottedIpv4("1.2.3"));
  CHECK_FALSE(gvirtus::isDottedIpv4("01.2.3.4"));
  CHECK_FALSE(gvirtus::isDottedIpv4("1.2.3.4 "));
  CHECK_FALSE(gvirtus::isDottedIpv4("::1"));
  CHECK_FALSE(gvirtus::isDottedIpv4("gpu1.example.com"));
}

TEST_CASE("Ipv4Resolver resolves a name to all its A records", "[ipv4_resolver]") {
  TestDnsServer server(testZone());
  auto resolver = makeResolver(server);

  auto addresses = resolver->resolve("two.gvirtus.test");
  REQUIRE(addresses);
  CHECK(*addresses == std::vector<std::string>{"10.0.0.1", "10.0.0.2"});
  CHECK(server.queries() >= 1);

  SECTION("names are case-insensitive and may end with a dot") {
    auto upper = resolver->resolve("TWO.Gvirtus.test.");
    REQUIRE(upper);
    CHECK(*upper == std::vector<std::string>{"10.0.0.1", "10.0.0.2"});
  }
}

TEST_CASE("Ipv4Resolver returns an IPv4 literal without a query", "[ipv4_resolver]") {
  TestDnsServer server(testZone());
  auto resolver = makeResolver(server);
  auto addresses = resolver->resolve("10.1.2.3");
  REQUIRE(addresses);
  CHECK(*addresses == std::vector<std::string>{"10.1.2.3"});
  CHECK(server.queries() == 0);
}

TEST_CASE("Ipv4Resolver rejects IPv6 literals and invalid names", "[ipv4_resolver]") {
  TestDnsServer server(testZone());
  auto resolver = makeResolver(server);
  for (const std::string host : {"::1", "fd00::1", "[::1]"}) {
    INFO(host);
    auto result = resolver->resolve(host);
    REQUIRE_FALSE(result);
    CHECK_THAT(result.error().message, Catch::Contains(host));
  }
  CHECK_THAT(resolver->resolve("::1").error().message, Catch::Contains("IPv6"));
  for (const std::string& host :
       std::vector<std::string>{"", "bad name", "a..b", "-a.test", "a-.test", "1.2.3", "256.1.1.1",
                                "under/score", std::string(64, 'a') + ".test", "host:9999"}) {
    INFO(host);
    auto result = resolver->resolve(host);
    REQUIRE_FALSE(result);
    CHECK_THAT(result.error().message, Catch::Contains("\"" + host + "\""));
  }
  CHECK(server.queries() == 0);
}

TEST_CASE("Ipv4Resolver errors name the host", "[ipv4_resolver]") {
  TestDnsServer server(testZone());
  auto resolver = makeResolver(server);

  SECTION("NXDOMAIN") {
    auto result = resolver->resolve("missing.gvirtus.test");
    REQUIRE_FALSE(result);
    CHECK_THAT(result.error().message, Catch::Contains("missing.gvirtus.test"));
    CHECK_THAT(result.error().message, Catch::Contains("not found"));
  }
  SECTION("AAAA records only") {
    auto result = resolver->resolve("v6only.gvirtus.test");
    REQUIRE_FALSE(result);
    CHECK_THAT(result.error().message, Catch::Contains("v6only.gvirtus.test"));
  }
}

TEST_CASE("Ipv4Resolver honours its timeout", "[ipv4_resolver]") {
  TestDnsServer server(testZone());
  auto resolver = makeResolver(server, 300ms, 2);
  const auto start = std::chrono::steady_clock::now();
  auto result = resolver->resolve("silent.gvirtus.test");
  const auto took = std::chrono::steady_clock::now() - start;
  REQUIRE_FALSE(result);
  CHECK_THAT(result.error().message, Catch::Contains("silent.gvirtus.test"));
  CHECK_THAT(result.error().message, Catch::Contains("300ms"));
  CHECK(took >= 250ms);
  CHECK(took < 1500ms);
  CHECK(server.queries() >= 2);  // retried within the budget
}

TEST_CASE("Ipv4Resolver resolves from many threads at once", "[ipv4_resolver]") {
  TestDnsServer server(testZone());
  auto resolver = makeResolver(server);
  std::vector<std::future<bool>> results;
  for (int i = 0; i < 8; ++i) {
    results.push_back(std::async(std::launch::async, [&resolver, i] {
      auto addresses = resolver->resolve(i % 2 == 0 ? "two.gvirtus.test" : "10.9.8.7");
      return addresses && !addresses->empty() && (i % 2 == 1 || addresses->size() == 2);
    }));
  }
  for (auto& result : results) {
    CHECK(result.get());
  }
}

TEST_CASE("Ipv4Resolver::create checks its options", "[ipv4_resolver]") {
  using Options = Ipv4ResolverOptions;
  CHECK(Ipv4Resolver::create(Options{.servers = {"127.0.0.1"}}));
  CHECK(Ipv4Resolver::create(Options{.servers = {"127.0.0.1:5353", "10.0.0.1:53"}}));
  CHECK(Ipv4Resolver::create());

  auto badHost = Ipv4Resolver::create(Options{.servers = {"dns.example.com:53"}});
  REQUIRE_FALSE(badHost);
  CHECK_THAT(badHost.error().message, Catch::Contains("dns.example.com:53"));

  auto badPort = Ipv4Resolver::create(Options{.servers = {"127.0.0.1:99999"}});
  REQUIRE_FALSE(badPort);
  CHECK_THAT(badPort.error().message, Catch::Contains("port"));

  CHECK_FALSE(Ipv4Resolver::create(Options{.servers = {"127.0.0.1:"}}));
  Options zeroTimeout;
  zeroTimeout.timeout = 0ms;
  CHECK_FALSE(Ipv4Resolver::create(zeroTimeout));
  Options zeroTries;
  zeroTries.tries = 0;
  CHECK_FALSE(Ipv4Resolver::create(zeroTries));
}
