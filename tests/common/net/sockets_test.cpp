#include "common/net/sockets.h"

#include <catch2/catch.hpp>

#include <string>

namespace gvirtus {
namespace {

TEST_CASE("parseListenAddress splits host and port", "[sockets]") {
  auto any = parseListenAddress(":8080");
  REQUIRE(any);
  CHECK(any->first.empty());
  CHECK(any->second == 8080);
  auto v4 = parseListenAddress("127.0.0.1:0");
  REQUIRE(v4);
  CHECK(v4->first == "127.0.0.1");
  CHECK(v4->second == 0);
  auto v6 = parseListenAddress("[::1]:8443");
  REQUIRE(v6);
  CHECK(v6->first == "::1");
  CHECK(v6->second == 8443);
  CHECK_FALSE(parseListenAddress("8080"));
  CHECK_FALSE(parseListenAddress(":http"));
  CHECK_FALSE(parseListenAddress(":70000"));
  CHECK_FALSE(parseListenAddress("::1:80"));
  CHECK_FALSE(parseListenAddress("[::1]80"));
  CHECK(parseListenAddress("bad").error().message.find("bad") != std::string::npos);
}

TEST_CASE("openListener binds, reports its port and refuses a port in use", "[sockets]") {
  auto first = openListener("127.0.0.1", 0);
  REQUIRE(first);
  int port = boundPort(first->get());
  CHECK(port > 0);
  auto second = openListener("127.0.0.1", port);
  REQUIRE_FALSE(second);
  CHECK(second.error().message.find(std::to_string(port)) != std::string::npos);
  CHECK_FALSE(openListener("no-such-host.invalid", 0));
  CHECK(peerAddress(first->get()).first.empty());  // listening: no peer
}

}  // namespace
}  // namespace gvirtus
