#include "device-plugin/dra/claim_preparer.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/base/atomic_file.h"
#include "device-plugin/dra_test_support.h"
#include "support/temp_dir.h"

using namespace gvirtus;
using namespace gvirtus::device_plugin;
using gvirtus::device_plugin::test::allocatedClaim;
using gvirtus::device_plugin::test::backendSlice;
using gvirtus::device_plugin::test::FakeClaimSource;
using gvirtus::testing::TempDir;
using nlohmann::json;

namespace {

struct Fixture {
  TempDir state;
  TempDir cdi;
  FakeClaimSource source;
  ClaimFiles files{state.path(), cdi.path()};
  ClaimPreparer preparer{source, files, {"cudart"}};

  // The server address properties.json names for a prepared claim.
  std::string preparedAddress(const std::string& uid) const {
    const auto properties = json::parse(readWholeFile(files.propertiesPath(uid)));
    const auto& endpoint = properties["communicator"][0]["endpoint"];
    return endpoint["server_address"].get<std::string>() + ":" +
           endpoint["port"].get<std::string>();
  }
};

}  // namespace

TEST_CASE("a claim allocated one device is prepared with its backend's address", "[dra-prepare]") {
  Fixture f;
  f.source.setSlices(
      {backendSlice("gpus/be-a", "10.0.0.7", 9999), backendSlice("gpus/be-b", "10.0.0.8", 7777)});
  f.source.putClaim(allocatedClaim("team", "c1", "u-1", {{"gpus/be-b", "gpu-0"}}, "share-1"));
  f.source.putClaim(allocatedClaim("team", "c2", "u-2", {{"gpus/be-a", "gpu-0"}}));
  auto results = f.preparer.prepare({{"team", "c1", "u-1"}, {"team", "c2", "u-2"}});
  REQUIRE(results.size() == 2);
  REQUIRE(results.at("u-1").has_value());
  const PreparedDevice& prepared = *results.at("u-1");
  CHECK(prepared.allocated ==
        dra::AllocatedDevice{"gpu", "gpus/be-b", "gpu-0", "share-1", std::nullopt});
  CHECK(prepared.cdiDevice == "gvirtus.io/claim=u-1");
  CHECK(f.preparedAddress("u-1") == "10.0.0.8:7777");
  REQUIRE(results.at("u-2").has_value());
  CHECK(f.preparedAddress("u-2") == "10.0.0.7:9999");
  CHECK(f.source.sliceLists == 1);  // once for the whole call
  const auto properties = json::parse(readWholeFile(f.files.propertiesPath("u-1")));
  CHECK(properties["communicator"][0]["plugins"] == json::array({"cudart"}));
}

TEST_CASE("a claim prepared before keeps its backend when the slices change", "[dra-prepare]") {
  Fixture f;
  f.source.setSlices({backendSlice("gpus/be-a", "10.0.0.7", 9999)});
  f.source.putClaim(allocatedClaim("team", "c1", "u-1", {{"gpus/be-a", "gpu-0"}}));
  REQUIRE(f.preparer.prepare({{"team", "c1", "u-1"}}).at("u-1").has_value());
  // The backend's slice is withdrawn (or rewritten), and the plugin restarted: the kubelet
  // asks again for a claim its pod still runs with.
  f.source.setSlices({});
  ClaimPreparer restarted(f.source, f.files, {"cudart"});
  auto again = restarted.prepare({{"team", "c1", "u-1"}});
  REQUIRE(again.at("u-1").has_value());
  CHECK(again.at("u-1")->allocated.pool == "gpus/be-a");
  CHECK(f.preparedAddress("u-1") == "10.0.0.7:9999");
  CHECK(f.source.sliceLists == 1);
}

TEST_CASE("files left for another allocation of the claim are written anew", "[dra-prepare]") {
  Fixture f;
  f.source.setSlices(
      {backendSlice("gpus/be-a", "10.0.0.7", 9999), backendSlice("gpus/be-b", "10.0.0.8", 7777)});
  f.source.putClaim(allocatedClaim("team", "c1", "u-1", {{"gpus/be-a", "gpu-0"}}));
  REQUIRE(f.preparer.prepare({{"team", "c1", "u-1"}}).at("u-1").has_value());
  // Deallocated and allocated again elsewhere with no unprepare between (lost kubelet state):
  // the answer and the file name the new device, never the old backend.
  f.source.putClaim(allocatedClaim("team", "c1", "u-1", {{"gpus/be-b", "gpu-0"}}));
  auto again = f.preparer.prepare({{"team", "c1", "u-1"}});
  REQUIRE(again.at("u-1").has_value());
  CHECK(again.at("u-1")->allocated.pool == "gpus/be-b");
  CHECK(f.preparedAddress("u-1") == "10.0.0.8:7777");
  CHECK(f.source.sliceLists == 2);
}

TEST_CASE("claims that cannot be prepared say why, and leave nothing on disk", "[dra-prepare]") {
  Fixture f;
  f.source.setSlices({backendSlice("gpus/be-a", "10.0.0.7", 9999)});
  f.source.putClaim(allocatedClaim("team", "replaced", "u-new", {{"gpus/be-a", "gpu-0"}}));
  f.source.putClaim(
      allocatedClaim("team", "two", "u-two", {{"gpus/be-a", "gpu-0"}, {"gpus/be-a", "gpu-1"}}));
  f.source.putClaim(allocatedClaim("team", "gone", "u-gone", {{"gpus/be-x", "gpu-0"}}));
  json unallocated = allocatedClaim("team", "waiting", "u-wait", {});
  unallocated.erase("status");
  f.source.putClaim(unallocated);
  auto results = f.preparer.prepare({{"team", "replaced", "u-old"},
                                     {"team", "two", "u-two"},
                                     {"team", "gone", "u-gone"},
                                     {"team", "waiting", "u-wait"},
                                     {"team", "missing", "u-missing"},
                                     {"team", "bad", "../etc"}});
  auto reason = [&](const std::string& uid) {
    REQUIRE_FALSE(results.at(uid).has_value());
    return results.at(uid).error().message;
  };
  CHECK_THAT(reason("u-old"), Catch::Contains("deleted and made again"));
  CHECK_THAT(reason("u-two"), Catch::Contains("allocated 2 devices"));
  CHECK_THAT(reason("u-gone"), Catch::Contains("gpus/be-x/gpu-0 is in no ResourceSlice"));
  CHECK_THAT(reason("u-wait"), Catch::Contains("not allocated"));
  CHECK_THAT(reason("u-missing"), Catch::Contains("not found"));
  CHECK_THAT(reason("../etc"), Catch::Contains("is not 1-64 letters"));
  CHECK(f.files.preparedClaims().empty());
  CHECK(std::filesystem::is_empty(f.cdi.path()));
}

TEST_CASE("unprepare removes a claim's files, and repeating it is no error", "[dra-prepare]") {
  Fixture f;
  f.source.setSlices({backendSlice("gpus/be-a", "10.0.0.7", 9999)});
  f.source.putClaim(allocatedClaim("team", "c1", "u-1", {{"gpus/be-a", "gpu-0"}}));
  REQUIRE(f.preparer.prepare({{"team", "c1", "u-1"}}).at("u-1").has_value());
  REQUIRE(f.files.prepared("u-1"));
  for (int i = 0; i < 2; ++i) {
    auto results = f.preparer.unprepare({{"team", "c1", "u-1"}});
    CHECK(results.at("u-1").has_value());
    CHECK_FALSE(f.files.prepared("u-1"));
  }
}
