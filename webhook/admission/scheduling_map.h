#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/base/error.h"

// The gpu-scheduling-map annotation (docs/pod-contract.md, "gpu-scheduling-map"): lines
// `INDEX=NODE:DEVICES` pin pod INDEX of a StatefulSet to NODE with
// CUDA_VISIBLE_DEVICES=DEVICES.
namespace gvirtus::webhook {

struct SchedulingEntry {
  int64_t index = 0;
  std::string node;
  std::string devices;  // normalized: "0,1"
  int line = 0;         // 1-based, in the annotation
};

using SchedulingMap = std::map<int64_t, SchedulingEntry>;

// Blank lines and lines starting with '#' are skipped; whitespace around every part is
// fine. Errors name the line: "gpu-scheduling-map line 2 (\"1node2:2\"): missing '='".
Result<SchedulingMap> parseSchedulingMap(std::string_view text);

// The pod's index: label apps.kubernetes.io/pod-index, else the `-N` suffix of its name
// (`fallbackName` when the object has no name yet).
std::optional<int64_t> podIndex(const nlohmann::json& pod, const std::string& fallbackName = {});

// A required node affinity kubernetes.io/hostname In [node], ANDed into every existing
// node selector term (or the only term), and CUDA_VISIBLE_DEVICES=devices in every
// container and init container, set on `pod`. Changes nothing when the pod already has
// both.
void applySchedulingEntry(nlohmann::json& pod, const SchedulingEntry& entry);

}  // namespace gvirtus::webhook
