#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace gvirtus::labeler {

// What the labeler wants on a node.
struct LabelPolicy {
  std::string defaultFrontend = "true";  // written only when the label is missing
  std::string defaultBackend = "false";  // written only when the label is missing
  // The detected truth for gvirtus.io/gpu.present; nullopt leaves the label alone (with
  // --all-nodes, one process cannot see other nodes' devices).
  std::optional<bool> gpuPresent;
};

// The merge patch that brings `node` to the policy, or nullopt when it already is. The
// patch carries the node's resourceVersion, so a label an operator set between our read
// and our write makes the API server answer 409 instead of us overwriting it.
std::optional<nlohmann::json> labelPatch(const nlohmann::json& node, const LabelPolicy& policy);

}  // namespace gvirtus::labeler
