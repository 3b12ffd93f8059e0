#include "backend-shim/peers/list.h"

#include <catch2/catch.hpp>

using namespace gvirtus::backend_shim;

TEST_CASE("peer list: the addresses of gvirtus.io/peers, in any order", "[peer_list]") {
  const ParsedPeers parsed = parsePeers("10.244.1.5,10.244.2.7");
  CHECK(parsed.malformed == 0);
  CHECK_FALSE(parsed.truncated);
  CHECK(parsed.peers.size() == 2);
  CHECK(parsed.peers.contains(*parseIpv4("10.244.1.5")));
  CHECK(parsed.peers.contains(*parseIpv4("10.244.2.7")));
  CHECK_FALSE(parsed.peers.contains(*parseIpv4("10.244.1.6")));
  // The same set written another way is the same list.
  CHECK(parsePeers(" 10.244.2.7 , 10.244.1.5,,10.244.2.7 ").peers == parsed.peers);
}

TEST_CASE("peer list: empty and blank values are the empty list", "[peer_list]") {
  for (const char* text : {"", " ", ",", " , ,"}) {
    const ParsedPeers parsed = parsePeers(text);
    CHECK(parsed.peers.size() == 0);
    CHECK(parsed.malformed == 0);
  }
}

TEST_CASE("peer list: entries that are not IPv4 addresses are skipped and counted", "[peer_list]") {
  const ParsedPeers parsed =
      parsePeers("10.0.0.1,fd00::1,10.0.0.256,pod-a,1.2.3,01.2.3.4,10.0.0.2, 1.2.3.4.5");
  CHECK(parsed.peers == PeerList({*parseIpv4("10.0.0.1"), *parseIpv4("10.0.0.2")}));
  CHECK(parsed.malformed == 6);
  CHECK(parsed.firstMalformed == "fd00::1");
  // A long entry is shown cut.
  CHECK(parsePeers(std::string(1000, 'x')).firstMalformed.size() == 64);
}

TEST_CASE("peer list: at most the limit of addresses is kept", "[peer_list]") {
  const ParsedPeers parsed = parsePeers("10.0.0.1,10.0.0.2,10.0.0.3", 2);
  CHECK(parsed.truncated);
  CHECK(parsed.peers.size() == 2);
  CHECK_FALSE(parsed.peers.contains(*parseIpv4("10.0.0.3")));

  std::string many;
  for (int i = 0; i < 70000; ++i) {
    many += "10." + std::to_string(i / 65536) + "." + std::to_string(i / 256 % 256) + "." +
            std::to_string(i % 256) + ",";
  }
  const ParsedPeers capped = parsePeers(many);
  CHECK(capped.truncated);
  CHECK(capped.peers.size() == kMaxPeers);
}

TEST_CASE("peer list: IPv4 text both ways", "[peer_list]") {
  CHECK(parseIpv4("10.244.1.5") == 0x0af40105u);
  CHECK(formatIpv4(0x0af40105u) == "10.244.1.5");
  CHECK_FALSE(parseIpv4("").has_value());
  CHECK_FALSE(parseIpv4("255.255.255.255 ").has_value());
  CHECK_FALSE(parseIpv4("::ffff:10.0.0.1").has_value());
}
