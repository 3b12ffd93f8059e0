// What a backend publishes for DRA: its GPUs as shared devices of gpu.gvirtus.io.
#include "webhook/dra/slice.h"

#include <catch2/catch.hpp>

#include "webhook/fixtures.h"

using namespace gvirtus::webhook;
using gvirtus::GpuLoad;
using gvirtus::webhook::testing::backend;
using nlohmann::json;

TEST_CASE("a backend's GPUs become shared devices reachable from frontend nodes", "[dra-slice]") {
  Backend b = backend("10.0.0.7", 3, 16, "be-1", "zone-a");
  b.load->gpus = {GpuLoad{0, 81920, 4096, 50, "GPU-0a", "NVIDIA H100 80GB HBM3"},
                  GpuLoad{1, 0, 0, 0, {}, {}}, GpuLoad{2, 40960, 0, 0, {}, {}}};
  auto slice = resourceSliceFor(b, 4);
  REQUIRE(slice.has_value());
  CHECK((*slice)["apiVersion"] == "resource.k8s.io/v1");
  CHECK((*slice)["metadata"]["name"] == "gvirtus-gvirtus-system-be-1");
  const json& spec = (*slice)["spec"];
  CHECK(spec["driver"] == "gpu.gvirtus.io");
  CHECK(spec["pool"] ==
        json{{"name", "gvirtus-system/be-1"}, {"generation", 4}, {"resourceSliceCount", 1}});
  CHECK_FALSE(spec.contains("nodeName"));
  CHECK(spec["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0] ==
        json{{"key", "gvirtus.io/frontend.allowed"},
             {"operator", "In"},
             {"values", json::array({"true"})}});

  // A GPU that reports no memory is nothing a claim could be counted against.
  REQUIRE(spec["devices"].size() == 2);
  const json& gpu0 = spec["devices"][0];
  CHECK(gpu0["name"] == "gpu-0");
  CHECK(spec["devices"][1]["name"] == "gpu-2");
  CHECK(gpu0["allowMultipleAllocations"] == true);
  CHECK(gpu0["attributes"]["endpoint"] == json{{"string", "10.0.0.7:9999"}});
  CHECK(gpu0["attributes"]["ip"] == json{{"string", "10.0.0.7"}});
  CHECK(gpu0["attributes"]["port"] == json{{"int", 9999}});
  CHECK(gpu0["attributes"]["index"] == json{{"int", 0}});
  CHECK(gpu0["attributes"]["backendPod"] == json{{"string", "be-1"}});
  CHECK(gpu0["attributes"]["backendNamespace"] == json{{"string", "gvirtus-system"}});
  CHECK(gpu0["attributes"]["node"] == json{{"string", "gpu-be-1"}});
  CHECK(gpu0["attributes"]["zone"] == json{{"string", "zone-a"}});
  CHECK(gpu0["attributes"]["uuid"] == json{{"string", "GPU-0a"}});
  CHECK(gpu0["attributes"]["model"] == json{{"string", "NVIDIA H100 80GB HBM3"}});
  // Not known for GPU 2: no attribute rather than an empty one.
  CHECK_FALSE(spec["devices"][1]["attributes"].contains("model"));
  CHECK(gpu0["capacity"]["memory"]["value"] == "81920Mi");
  // The backend's 16 sessions are for both GPUs together: 8 each, never 32 in all.
  CHECK(gpu0["capacity"]["sessions"]["value"] == "8");
  CHECK(gpu0["capacity"]["sessions"]["requestPolicy"] ==
        json{{"default", "1"}, {"validValues", json::array({"1"})}});
}

TEST_CASE("a backend without a session limit offers the documented number", "[dra-slice]") {
  auto slice = resourceSliceFor(backend("10.0.0.7", 0, 0, "be-1"));
  REQUIRE(slice.has_value());
  CHECK((*slice)["spec"]["devices"][0]["capacity"]["sessions"]["value"] ==
        std::to_string(kUnlimitedSessions));
  // An odd limit over two GPUs is rounded down, at least one each.
  Backend b = backend("10.0.0.7", 0, 3, "be-1");
  b.load->gpus = {GpuLoad{0, 1024, 0, 0, {}, {}}, GpuLoad{1, 1024, 0, 0, {}, {}}};
  CHECK((*resourceSliceFor(b))["spec"]["devices"][1]["capacity"]["sessions"]["value"] == "1");
}

TEST_CASE("a backend with nothing to offer publishes no slice", "[dra-slice]") {
  Backend draining = backend("10.0.0.7", 0, 16, "be-1");
  draining.draining = true;
  CHECK_FALSE(resourceSliceFor(draining).has_value());

  Backend unreported = backend("10.0.0.7", 0, 16, "be-1");
  unreported.load.reset();
  CHECK_FALSE(resourceSliceFor(unreported).has_value());

  Backend noMemory = backend("10.0.0.7", 0, 16, "be-1");
  noMemory.load->gpus = {GpuLoad{0, 0, 0, 0, {}, {}}};
  CHECK_FALSE(resourceSliceFor(noMemory).has_value());
}

TEST_CASE("where devices can be tainted, a draining backend's devices stay published, NoSchedule",
          "[dra-slice]") {
  Backend b = backend("10.0.0.7", 2, 16, "be-1");
  b.load->gpus.push_back(GpuLoad{1, 81920, 0, 0, {}, {}});
  const json serving = *resourceSliceFor(b, 1, true);
  for (const auto& device : serving["spec"]["devices"]) {
    CHECK_FALSE(device.contains("taints"));
  }
  b.draining = true;
  auto draining = resourceSliceFor(b, 1, true);
  REQUIRE(draining.has_value());
  REQUIRE((*draining)["spec"]["devices"].size() == 2);
  for (const auto& device : (*draining)["spec"]["devices"]) {
    CHECK(device["taints"] ==
          json::array({{{"key", "gpu.gvirtus.io/draining"}, {"effect", "NoSchedule"}}}));
  }
  // Draining and back is a change of what is offered; the time the API server stamps on a
  // taint is not.
  CHECK(compareSlices(serving, *draining) == SliceChange::kUpdate);
  json stored = *draining;
  stored["spec"]["devices"][0]["taints"][0]["timeAdded"] = "2026-11-29T18:00:00Z";
  CHECK(compareSlices(stored, *draining) == SliceChange::kNone);
  // Without device taints (Kubernetes 1.36 and older) it is withdrawn, as before.
  CHECK_FALSE(resourceSliceFor(b, 1, false).has_value());
}

TEST_CASE("a slice is compared by what it offers, not by the load or the form of its numbers",
          "[dra-slice]") {
  Backend b = backend("10.0.0.7", 1, 16, "be-1");
  const json first = *resourceSliceFor(b, 1);
  CHECK(compareSlices(first, *resourceSliceFor(b, 7)) == SliceChange::kNone);

  // As the API server writes it back: 81920Mi is 80Gi.
  json stored = first;
  stored["spec"]["devices"][0]["capacity"]["memory"]["value"] = "80Gi";
  stored["metadata"]["resourceVersion"] = "12";
  CHECK(compareSlices(stored, first) == SliceChange::kNone);

  b.load->connections = 9;
  b.load->gpus[0].memoryUsedMiB = 60000;
  b.load->gpus[0].utilization = 99;
  CHECK(compareSlices(first, *resourceSliceFor(b)) == SliceChange::kNone);

  b.load->gpus[0].memoryTotalMiB = 40960;
  CHECK(compareSlices(first, *resourceSliceFor(b)) == SliceChange::kUpdate);
  CHECK(compareSlices(first, *resourceSliceFor(backend("10.0.0.8", 1, 16, "be-1"))) ==
        SliceChange::kUpdate);

  // Edits by someone else: an attribute, the node selector, the label.
  json edited = first;
  edited["spec"]["devices"][0]["attributes"]["endpoint"] = {{"string", "10.6.6.6:9999"}};
  CHECK(compareSlices(edited, first) == SliceChange::kUpdate);
  edited = first;
  edited["spec"]["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] =
      json::array({"false"});
  CHECK(compareSlices(edited, first) == SliceChange::kUpdate);
  edited = first;
  edited["metadata"].erase("labels");
  CHECK(compareSlices(edited, first) == SliceChange::kUpdate);

  // What cannot be changed in place: another pool, a node's slice, all nodes.
  edited = first;
  edited["spec"]["pool"]["name"] = "elsewhere/be-1";
  CHECK(compareSlices(edited, first) == SliceChange::kReplace);
  edited = first;
  edited["spec"].erase("nodeSelector");
  edited["spec"]["nodeName"] = "gpu-7";
  CHECK(compareSlices(edited, first) == SliceChange::kReplace);
  edited = first;
  edited["spec"].erase("nodeSelector");
  edited["spec"]["allNodes"] = true;
  CHECK(compareSlices(edited, first) == SliceChange::kReplace);
}

TEST_CASE("what the API would refuse is never published", "[dra-slice]") {
  // A GPU index reported twice: one device, the first.
  Backend twice = backend("10.0.0.7", 0, 16, "be-1");
  twice.load->gpus = {GpuLoad{0, 1024, 0, 0, {}, {}}, GpuLoad{0, 2048, 0, 0, {}, {}}};
  auto slice = resourceSliceFor(twice);
  REQUIRE(slice.has_value());
  REQUIRE((*slice)["spec"]["devices"].size() == 1);
  CHECK((*slice)["spec"]["devices"][0]["capacity"]["memory"]["value"] == "1024Mi");

  // One session over three GPUs: one device of one session, not three.
  Backend narrow = backend("10.0.0.7", 0, 1, "be-1");
  narrow.load->gpus = {GpuLoad{0, 1024, 0, 0, {}, {}}, GpuLoad{1, 1024, 0, 0, {}, {}},
                       GpuLoad{2, 1024, 0, 0, {}, {}}};
  slice = resourceSliceFor(narrow);
  REQUIRE((*slice)["spec"]["devices"].size() == 1);
  CHECK((*slice)["spec"]["devices"][0]["capacity"]["sessions"]["value"] == "1");
}

TEST_CASE("long names stay within the API's limits", "[dra-slice]") {
  // A cut that lands on a dot leaves none at the end of the kept part.
  const std::string longName = std::string(233, 'a') + "." + std::string(6, 'b');
  Backend one = backend("10.0.0.7", 0, 16, longName + "-1");
  Backend two = backend("10.0.0.8", 0, 16, longName + "-2");
  const std::string nameOne = sliceName(one);
  CHECK(nameOne.size() == 253);
  CHECK(nameOne != sliceName(two));
  CHECK(nameOne == sliceName(one));
  CHECK(nameOne.find(".-") == std::string::npos);
  CHECK(nameOne.find("-.") == std::string::npos);
  // A value longer than 64 characters is no attribute: left out, not cut.
  auto slice = resourceSliceFor(one);
  REQUIRE(slice.has_value());
  CHECK_FALSE((*slice)["spec"]["devices"][0]["attributes"].contains("backendPod"));
  CHECK((*slice)["metadata"]["name"] == nameOne);
  // Nor is "gvirtus-system/" and the pod's name a pool name: too long.
  CHECK((*slice)["spec"]["pool"]["name"] == nameOne);
  CHECK((*resourceSliceFor(backend("10.0.0.7", 0, 16, "be-1")))["spec"]["pool"]["name"] ==
        "gvirtus-system/be-1");
}
