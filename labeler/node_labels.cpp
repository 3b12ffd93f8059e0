#include "labeler/node_labels.h"

#include "common/contract/labels.h"

namespace gvirtus::labeler {
namespace {

const nlohmann::json* findLabel(const nlohmann::json& node, const char* key) {
  const auto metadata = node.find("metadata");
  if (metadata == node.end() || !metadata->is_object()) {
    return nullptr;
  }
  const auto labels = metadata->find("labels");
  if (labels == metadata->end() || !labels->is_object()) {
    return nullptr;
  }
  const auto value = labels->find(key);
  return value == labels->end() ? nullptr : &*value;
}

}  // namespace

std::optional<nlohmann::json> labelPatch(const nlohmann::json& node, const LabelPolicy& policy) {
  nlohmann::json labels = nlohmann::json::object();
  if (findLabel(node, names::kFrontendAllowed) == nullptr) {
    labels[names::kFrontendAllowed] = policy.defaultFrontend;
  }
  if (findLabel(node, names::kBackendAllowed) == nullptr) {
    labels[names::kBackendAllowed] = policy.defaultBackend;
  }
  if (policy.gpuPresent) {
    const std::string truth = *policy.gpuPresent ? "true" : "false";
    const auto* current = findLabel(node, names::kGpuPresent);
    if (current == nullptr || !current->is_string() || current->get<std::string>() != truth) {
      labels[names::kGpuPresent] = truth;
    }
  }
  if (labels.empty()) {
    return std::nullopt;
  }
  nlohmann::json patch = {{"metadata", {{"labels", labels}}}};
  if (auto rv = node.value("/metadata/resourceVersion"_json_pointer, std::string()); !rv.empty()) {
    patch["metadata"]["resourceVersion"] = rv;
  }
  return patch;
}

}  // namespace gvirtus::labeler
