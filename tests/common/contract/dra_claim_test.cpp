#include "common/contract/dra_claim.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace gvirtus::dra;
using nlohmann::json;

namespace {

json claimWith(json results) {
  return {{"metadata", {{"name", "c"}, {"uid", "u-1"}}},
          {"status", {{"allocation", {{"devices", {{"results", std::move(results)}}}}}}}};
}

json result(const std::string& driver, const std::string& request, const std::string& pool,
            const std::string& device) {
  return {{"driver", driver}, {"request", request}, {"pool", pool}, {"device", device}};
}

json slice(const std::string& pool, int64_t generation, json devices, json extra = json::object()) {
  json spec = {{"driver", "gpu.gvirtus.io"},
               {"pool", {{"name", pool}, {"generation", generation}, {"resourceSliceCount", 1}}},
               {"devices", std::move(devices)}};
  spec.update(extra);
  return {{"spec", std::move(spec)}};
}

json gpu(const std::string& name, json ip, json port) {
  return {{"name", name}, {"attributes", {{"ip", std::move(ip)}, {"port", std::move(port)}}}};
}

}  // namespace

TEST_CASE("a claim's devices of our driver, in order, subrequests cut", "[dra-claim]") {
  json first = result("gpu.gvirtus.io", "gpu/large", "ns/be", "gpu-0");
  first["shareID"] = "4f1c";
  auto devices =
      allocatedDevices(claimWith({result("other.example.com", "nic", "p", "d"), first,
                                  result("gpu.gvirtus.io", "second", "ns/be2", "gpu-1")}));
  REQUIRE(devices.has_value());
  REQUIRE(devices->size() == 2);
  CHECK((*devices)[0] == AllocatedDevice{"gpu", "ns/be", "gpu-0", "4f1c", std::nullopt});
  CHECK((*devices)[1] == AllocatedDevice{"second", "ns/be2", "gpu-1", std::nullopt, std::nullopt});
}

TEST_CASE("a device's memory the scheduler counted for the claim", "[dra-claim]") {
  json counted = result("gpu.gvirtus.io", "gpu", "ns/be", "gpu-0");
  counted["consumedCapacity"] = {{"memory", "16Gi"}, {"sessions", "1"}};
  auto devices = allocatedDevices(claimWith({counted}));
  REQUIRE(devices.has_value());
  CHECK((*devices)[0].memoryMiB == 16384);
  counted["consumedCapacity"]["memory"] = "lots";
  auto bad = allocatedDevices(claimWith({counted}));
  REQUIRE_FALSE(bad.has_value());
  CHECK_THAT(bad.error().message, Catch::Contains("consumed memory that is not a quantity"));
}

TEST_CASE("a claim not allocated, or with a malformed result, is an error", "[dra-claim]") {
  CHECK_FALSE(allocatedDevices(json{{"status", json::object()}}).has_value());
  CHECK_FALSE(allocatedDevices(json::array()).has_value());
  auto bad = allocatedDevices(claimWith({result("gpu.gvirtus.io", "gpu", "", "gpu-0")}));
  REQUIRE_FALSE(bad.has_value());
  CHECK_THAT(bad.error().message, Catch::Contains("lacks its request, pool or device"));
  auto none = allocatedDevices(claimWith({result("other.example.com", "nic", "p", "d")}));
  REQUIRE(none.has_value());
  CHECK(none->empty());
}

TEST_CASE("a device's endpoint is read from its pool's newest slice", "[dra-claim]") {
  const AllocatedDevice wanted{"gpu", "ns/be", "gpu-1", std::nullopt, std::nullopt};
  std::vector<json> slices = {
      slice("ns/be", 1, {gpu("gpu-1", {{"string", "10.0.0.1"}}, {{"int", 9999}})}),
      slice("ns/be", 2,
            {gpu("gpu-0", {{"string", "10.0.0.9"}}, {{"int", 9999}}),
             gpu("gpu-1", {{"string", "10.0.0.2"}}, {{"int", 8888}})}),
      slice("ns/other", 5, {gpu("gpu-1", {{"string", "10.0.0.3"}}, {{"int", 9999}})})};
  auto endpoint = deviceEndpoint(slices, wanted);
  REQUIRE(endpoint.has_value());
  CHECK(*endpoint == DeviceEndpoint{"10.0.0.2", 8888});
}

TEST_CASE("a slice a node owns, or per-device node selection, is not trusted", "[dra-claim]") {
  const AllocatedDevice wanted{"gpu", "ns/be", "gpu-0", std::nullopt, std::nullopt};
  const json device = gpu("gpu-0", {{"string", "10.6.6.6"}}, {{"int", 9999}});
  for (const json& extra : {json{{"nodeName", "node-1"}}, json{{"perDeviceNodeSelection", true}}}) {
    auto endpoint = deviceEndpoint({slice("ns/be", 9, {device}, extra)}, wanted);
    REQUIRE_FALSE(endpoint.has_value());
    CHECK_THAT(endpoint.error().message, Catch::Contains("is in no ResourceSlice"));
  }
  json otherDriver = slice("ns/be", 9, {device});
  otherDriver["spec"]["driver"] = "other.example.com";
  CHECK_FALSE(deviceEndpoint({otherDriver}, wanted).has_value());
}

TEST_CASE("a device without a usable address or port is an error naming it", "[dra-claim]") {
  const AllocatedDevice wanted{"gpu", "ns/be", "gpu-0", std::nullopt, std::nullopt};
  auto check = [&](json ip, json port, const std::string& expected) {
    auto endpoint = deviceEndpoint({slice("ns/be", 1, {gpu("gpu-0", ip, port)})}, wanted);
    REQUIRE_FALSE(endpoint.has_value());
    CHECK_THAT(endpoint.error().message, Catch::Contains(expected));
    CHECK_THAT(endpoint.error().message, Catch::Contains("ns/be/gpu-0"));
  };
  check({{"string", "backend.example.com"}}, {{"int", 9999}}, "no IPv4 address");
  check({{"int", 10}}, {{"int", 9999}}, "no IPv4 address");
  check({{"string", "10.0.0.1"}}, {{"int", 0}}, "no port");
  check({{"string", "10.0.0.1"}}, {{"int", 65536}}, "no port");
  check({{"string", "10.0.0.1"}}, {{"string", "9999"}}, "no port");
  CHECK_FALSE(deviceEndpoint({}, wanted).has_value());
}
