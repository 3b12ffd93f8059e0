#include "common/contract/backend_requirements.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/base/json_access.h"
#include "common/base/strings.h"
#include "common/contract/labels.h"
#include "common/contract/quantity.h"

namespace gvirtus {

using nlohmann::json;

int64_t memoryDemandMiB(const BackendRequirements& pod, int64_t totalMiB) {
  int64_t demand = std::max(pod.gpuMemoryMiB.value_or(0), pod.kaiGpuMemoryMiB.value_or(0));
  if (pod.gpuFraction) {
    const double share = std::ceil(*pod.gpuFraction * static_cast<double>(totalMiB));
    demand = std::max(demand, static_cast<int64_t>(share));
  }
  return demand;
}

bool asksForGpuMemory(const BackendRequirements& pod) {
  return pod.gpuMemoryMiB.value_or(0) > 0 || pod.kaiGpuMemoryMiB.value_or(0) > 0 ||
         pod.gpuFraction.has_value();
}

Result<Policy> parsePolicy(std::string_view text) {
  if (text == "least-connections") {
    return Policy::LeastConnections;
  }
  if (text == "round-robin") {
    return Policy::RoundRobin;
  }
  if (text == "random") {
    return Policy::Random;
  }
  if (text == "same-zone") {
    return Policy::SameZone;
  }
  return fail("unknown policy \"" + std::string(text) +
              "\" (least-connections, round-robin, random or same-zone)");
}

std::string_view policyName(Policy policy) {
  switch (policy) {
    case Policy::LeastConnections:
      return "least-connections";
    case Policy::RoundRobin:
      return "round-robin";
    case Policy::Random:
      return "random";
    case Policy::SameZone:
      return "same-zone";
  }
  return "least-connections";
}

Result<BackendRequirements> requirementsFromPod(const json& pod) {
  BackendRequirements out;
  auto annotation = [&](std::string_view key) {
    return optionalStringAt(pod, {"metadata", "annotations", key});
  };
  auto invalid = [](std::string_view key, const std::string& value, const std::string& why) {
    return fail("annotation " + std::string(key) + "=\"" + value + "\": " + why);
  };
  if (auto text = annotation(names::kGpuMemoryAnnotation)) {
    auto mib = parseMemoryMiB(trim(*text));
    if (!mib) {
      return invalid(names::kGpuMemoryAnnotation, *text, mib.error().message);
    }
    out.gpuMemoryMiB = *mib;
  }
  if (auto text = annotation(names::kGpusAnnotation)) {
    auto gpus = parseNonNegative(trim(*text));
    if (!gpus) {
      return invalid(names::kGpusAnnotation, *text, "not a non-negative integer");
    }
    out.gpus = *gpus;
  }
  if (auto text = annotation(names::kKaiGpuFractionAnnotation)) {
    const std::string_view value = trim(*text);
    double fraction = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), fraction);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() ||
        !(fraction > 0 && fraction <= 1)) {
      return invalid(names::kKaiGpuFractionAnnotation, *text,
                     "not a share of one GPU above 0 and at most 1");
    }
    out.gpuFraction = fraction;
  }
  if (auto text = annotation(names::kKaiGpuMemoryAnnotation)) {
    auto mib = parseNonNegative(trim(*text));
    if (!mib) {
      return invalid(names::kKaiGpuMemoryAnnotation, *text, "not a non-negative integer (MiB)");
    }
    out.kaiGpuMemoryMiB = *mib;
  }
  if (auto text = annotation(names::kBackendPolicyAnnotation)) {
    auto policy = parsePolicy(trim(*text));
    if (!policy) {
      return invalid(names::kBackendPolicyAnnotation, *text, policy.error().message);
    }
    out.policy = *policy;
  }
  if (const std::string ns = stringAt(pod, {"metadata", "namespace"}),
      name = stringAt(pod, {"metadata", "name"});
      !ns.empty() && !name.empty()) {
    out.pod = ns + "/" + name;
  }
  if (const json* spec = member(pod, "spec")) {
    if (const json* selector = member(*spec, "nodeSelector")) {
      if (const json* zone = member(*selector, names::kZoneLabel);
          zone != nullptr && zone->is_string()) {
        out.zone = zone->get<std::string>();
      }
    }
  }
  return out;
}

}  // namespace gvirtus
