#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "common/contract/backend_requirements.h"

namespace gvirtus {

// GPU memory that a GVirtuS pod given a backend holds until it finishes: what it asked for
// (gvirtus.io/gpu-memory, KAI gpu-memory or gpu-fraction), on the GPU it was given
// (gvirtus.io/backend-gpu). A share is a reservation: an idle pod uses none of it yet, and a
// second pod must not be promised it.
struct GpuShare {
  std::string pod = {};  // "namespace/name"
  int64_t gpuIndex = 0;
  BackendRequirements demand;

  bool operator==(const GpuShare&) const = default;
};

// The GPU share a GVirtuS pod holds on the backend it was given ("IP:PORT", the share):
// it was given a GPU (gvirtus.io/backend, gvirtus.io/backend-gpu), asks for GPU memory, and
// has not finished. nullopt otherwise.
std::optional<std::pair<std::string, GpuShare>> heldShare(const nlohmann::json& pod);

}  // namespace gvirtus
