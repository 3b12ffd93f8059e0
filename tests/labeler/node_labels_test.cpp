#include "labeler/node_labels.h"

#include <catch2/catch.hpp>

using gvirtus::labeler::labelPatch;
using gvirtus::labeler::LabelPolicy;
using nlohmann::json;

namespace {

json node(json labels) {
  return {{"metadata", {{"name", "n1"}, {"resourceVersion", "42"}, {"labels", labels}}}};
}

}  // namespace

TEST_CASE("a bare node gets both role defaults and the GPU truth", "[labeler]") {
  auto patch = labelPatch(node(json::object()), LabelPolicy{"true", "false", false});
  REQUIRE(patch);
  CHECK(*patch == json{{"metadata",
                        {{"resourceVersion", "42"},
                         {"labels",
                          {{"gvirtus.io/frontend.allowed", "true"},
                           {"gvirtus.io/backend.allowed", "false"},
                           {"gvirtus.io/gpu.present", "false"}}}}}});
}

TEST_CASE("operator-set role labels are never changed", "[labeler]") {
  auto patch = labelPatch(node({{"gvirtus.io/frontend.allowed", "false"},
                                {"gvirtus.io/backend.allowed", "true"},
                                {"gvirtus.io/gpu.present", "true"}}),
                          LabelPolicy{"true", "false", true});
  CHECK_FALSE(patch);
}

TEST_CASE("an odd operator value is still the operator's", "[labeler]") {
  auto patch = labelPatch(node({{"gvirtus.io/frontend.allowed", "maybe"},
                                {"gvirtus.io/backend.allowed", ""},
                                {"gvirtus.io/gpu.present", "false"}}),
                          LabelPolicy{"true", "false", false});
  CHECK_FALSE(patch);
}

TEST_CASE("gpu.present always follows detection", "[labeler]") {
  json labels = {{"gvirtus.io/frontend.allowed", "true"},
                 {"gvirtus.io/backend.allowed", "false"},
                 {"gvirtus.io/gpu.present", "false"}};
  auto patch = labelPatch(node(labels), LabelPolicy{"true", "false", true});
  REQUIRE(patch);
  CHECK((*patch)["metadata"]["labels"] == json{{"gvirtus.io/gpu.present", "true"}});
}

TEST_CASE("without a GPU verdict the GPU label is left alone", "[labeler]") {
  json labels = {{"gvirtus.io/frontend.allowed", "true"}, {"gvirtus.io/backend.allowed", "false"}};
  CHECK_FALSE(labelPatch(node(labels), LabelPolicy{"true", "false", std::nullopt}));
}

TEST_CASE("a node without labels or resourceVersion still gets a patch", "[labeler]") {
  json bare = {{"metadata", {{"name", "n1"}}}};
  auto patch = labelPatch(bare, LabelPolicy{"false", "true", std::nullopt});
  REQUIRE(patch);
  CHECK_FALSE((*patch)["metadata"].contains("resourceVersion"));
  CHECK((*patch)["metadata"]["labels"]["gvirtus.io/backend.allowed"] == "true");
}
