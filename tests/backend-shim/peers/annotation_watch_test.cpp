#include "backend-shim/peers/annotation_watch.h"

#include <catch2/catch.hpp>
#include <optional>
#include <vector>

#include "support/fake_object_cache.h"

using namespace gvirtus::backend_shim;
using gvirtus::testing::FakeObjectCache;
using nlohmann::json;

namespace {

json pod(const std::optional<std::string>& peers, const std::string& phase = "Running",
         const std::optional<std::string>& shares = std::nullopt) {
  json object = {{"apiVersion", "v1"},
                 {"kind", "Pod"},
                 {"metadata",
                  {{"name", "backend-0"},
                   {"namespace", "gvirtus-system"},
                   {"resourceVersion", "7"},
                   {"labels", {{"app", "gvirtus-backend"}}}}},
                 {"status", {{"phase", phase}}}};
  if (peers) {
    object["metadata"]["annotations"] = {{"gvirtus.io/peers", *peers}, {"gvirtus.io/load", "{}"}};
  }
  if (shares) {
    object["metadata"]["annotations"]["gvirtus.io/peer-memory"] = *shares;
  }
  return object;
}

struct Watched {
  FakeObjectCache cache;
  std::vector<PeerList> lists;
  std::vector<PeerShares> shares;
  PeerAnnotationWatch watch{cache, [this](PeerList peers, PeerShares given) {
                              lists.push_back(std::move(peers));
                              shares.push_back(std::move(given));
                            }};
};

Ipv4 ip(const char* text) {
  return *parseIpv4(text);
}

}  // namespace

TEST_CASE("peer annotation watch: each change of gvirtus.io/peers is a new list",
          "[peer_annotation_watch]") {
  Watched w;
  w.cache.start();
  w.cache.put(pod("10.244.1.5,10.244.2.7"));
  REQUIRE(w.lists.size() == 1);
  CHECK(w.lists[0] == PeerList({ip("10.244.1.5"), ip("10.244.2.7")}));

  // Other changes of the pod (its status, the load annotation) hand nothing on.
  w.cache.put(pod("10.244.1.5,10.244.2.7", "Pending"));
  CHECK(w.lists.size() == 1);

  w.cache.put(pod("10.244.2.7"));
  REQUIRE(w.lists.size() == 2);
  CHECK(w.lists[1] == PeerList({ip("10.244.2.7")}));
  w.cache.put(pod(""));
  REQUIRE(w.lists.size() == 3);
  CHECK(w.lists[2].size() == 0);
  CHECK(w.watch.updates() == 3);
}

TEST_CASE("peer annotation watch: no annotation, or a deleted pod, is the empty list",
          "[peer_annotation_watch]") {
  Watched w;
  w.cache.start();
  w.cache.put(pod(std::nullopt));
  REQUIRE(w.lists.size() == 1);
  CHECK(w.lists[0].size() == 0);
  w.cache.put(pod(std::nullopt, "Pending"));  // still none: nothing new
  CHECK(w.lists.size() == 1);
  w.cache.put(pod("10.0.0.1"));
  REQUIRE(w.lists.size() == 2);
  CHECK(w.lists[1].contains(ip("10.0.0.1")));
  w.cache.put(pod(std::nullopt));  // removed: nobody may connect
  REQUIRE(w.lists.size() == 3);
  CHECK(w.lists[2].size() == 0);
  w.cache.put(pod("10.0.0.1"));
  w.cache.remove("gvirtus-system", "backend-0");
  REQUIRE(w.lists.size() == 5);
  CHECK(w.lists[4].size() == 0);
}

TEST_CASE("peer annotation watch: malformed entries are skipped, the rest kept",
          "[peer_annotation_watch]") {
  Watched w;
  w.cache.start();
  w.cache.put(pod("10.0.0.1,not-an-ip,10.0.0.2"));
  REQUIRE(w.lists.size() == 1);
  CHECK(w.lists[0] == PeerList({ip("10.0.0.1"), ip("10.0.0.2")}));
  // An annotation that is not a string holds no address.
  json odd = pod(std::nullopt);
  odd["metadata"]["annotations"] = {{"gvirtus.io/peers", json::array({"10.0.0.1"})}};
  w.cache.put(odd);
  REQUIRE(w.lists.size() == 2);
  CHECK(w.lists[1].size() == 0);
}

TEST_CASE("peer annotation watch: the cache keeps only what the watch reads",
          "[peer_annotation_watch]") {
  const json kept = peersAnnotationFields(pod("10.0.0.1"));
  CHECK(kept == json{{"metadata",
                      {{"name", "backend-0"},
                       {"namespace", "gvirtus-system"},
                       {"resourceVersion", "7"},
                       {"annotations", {{"gvirtus.io/peers", "10.0.0.1"}}}}}});
  CHECK(peersAnnotationFields(pod(std::nullopt)) ==
        json{{"metadata",
              {{"name", "backend-0"}, {"namespace", "gvirtus-system"}, {"resourceVersion", "7"}}}});
}

TEST_CASE("peer annotation watch: gvirtus.io/peer-memory gives the peers' shares",
          "[peer_annotation_watch]") {
  Watched w;
  w.cache.start();
  // An older webhook writes no shares: nobody is capped.
  w.cache.put(pod("10.0.0.1,10.0.0.2"));
  REQUIRE(w.shares.size() == 1);
  CHECK(w.shares[0].size() == 0);
  // A change of the shares alone is handed on, with the same list.
  w.cache.put(pod("10.0.0.1,10.0.0.2", "Running", "10.0.0.1=4096"));
  REQUIRE(w.shares.size() == 2);
  CHECK(w.lists[1] == w.lists[0]);
  CHECK(w.shares[1].bytesOf(ip("10.0.0.1")) == 4096ull << 20);
  CHECK_FALSE(w.shares[1].bytesOf(ip("10.0.0.2")).has_value());
  w.cache.put(pod("10.0.0.1,10.0.0.2", "Pending", "10.0.0.1=4096"));
  CHECK(w.shares.size() == 2);
  // Without the peers, shares count for nothing: the empty list and no shares.
  w.cache.put(pod(std::nullopt, "Running", "10.0.0.1=4096"));
  REQUIRE(w.shares.size() == 3);
  CHECK(w.lists[2].size() == 0);
  CHECK(w.shares[2].size() == 0);
  CHECK(
      peersAnnotationFields(pod("10.0.0.1", "Running", "10.0.0.1=1"))["metadata"]["annotations"] ==
      json{{"gvirtus.io/peers", "10.0.0.1"}, {"gvirtus.io/peer-memory", "10.0.0.1=1"}});
}

TEST_CASE("peer shares: ADDRESS=MiB entries, anything else skipped", "[peer_annotation_watch]") {
  const ParsedShares parsed = parsePeerShares(
      " 10.0.0.1=4096, 10.0.0.2 = 1 ,,10.0.0.3=0,10.0.0.4=-5,10.0.0.5=1x,nine=9,10.0.0.6,"
      "10.0.0.7=1073741825,10.0.0.1=2048");
  CHECK(parsed.shares.size() == 2);
  CHECK(parsed.shares.bytesOf(ip("10.0.0.1")) == 2048ull << 20);  // twice: the smaller
  CHECK(parsed.shares.bytesOf(ip("10.0.0.2")) == 1ull << 20);
  for (const char* without : {"10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7"}) {
    CHECK_FALSE(parsed.shares.bytesOf(ip(without)).has_value());
  }
  CHECK(parsed.malformed == 6);
  CHECK(parsed.firstMalformed == "10.0.0.3=0");
  CHECK(parsePeerShares("10.0.0.1=1,10.0.0.2=1,10.0.0.3=1", 2).shares.size() == 2);
  CHECK(parsePeerShares("").shares.size() == 0);
}
