#include "webhook/autoscale/autoscaler.h"

#include <algorithm>
#include <map>
#include <set>

// The scale-up plan (planScaleUp() of webhook/autoscale/autoscaler.h): the waiting pods'
// demand is placed, oldest first, onto the backends on their way and then onto candidate
// nodes, each a bin of one backend's sessions and GPUs.
namespace gvirtus::webhook {
namespace {

// A backend's worth of room that pods are planned onto.
struct Bin {
  enum class Kind { Coming, Draining, New, Unavailable };
  Kind kind;
  std::string node;  // empty for Unavailable: a backend no candidate within max can give
  int64_t sessions;
  std::optional<int64_t> gpus;
  std::optional<int64_t> gpuMemoryMiB;
  std::vector<int64_t> usedMiB;  // per GPU, when the memory is known
  bool used = false;

  Bin(Kind k, const CandidateNode* candidate, int64_t room) : kind(k), sessions(room) {
    if (candidate != nullptr) {
      node = candidate->name;
      gpus = candidate->gpus;
      gpuMemoryMiB = candidate->gpuMemoryMiB;
    }
    usedMiB.assign(
        static_cast<size_t>(std::max<int64_t>(1, std::min<int64_t>(gpus.value_or(1), 64))), 0);
  }

  // The GPU the pod's memory would go on; -1 when it asks for none or the memory is not
  // known; nullopt when the pod does not fit.
  std::optional<int> place(const BackendRequirements& pod) const {
    if (sessions <= 0 || (pod.gpus && gpus && *gpus < *pod.gpus)) {
      return std::nullopt;
    }
    if (!asksForGpuMemory(pod) || !gpuMemoryMiB) {
      return -1;
    }
    const int64_t demand = memoryDemandMiB(pod, *gpuMemoryMiB);
    std::optional<int> best;
    for (size_t i = 0; i < usedMiB.size(); ++i) {
      if (*gpuMemoryMiB - usedMiB[i] >= demand &&
          (!best || usedMiB[i] < usedMiB[static_cast<size_t>(*best)])) {
        best = static_cast<int>(i);
      }
    }
    return best;
  }

  bool take(const BackendRequirements& pod) {
    auto gpu = place(pod);
    if (!gpu) {
      return false;
    }
    --sessions;
    if (*gpu >= 0) {
      usedMiB[static_cast<size_t>(*gpu)] += memoryDemandMiB(pod, *gpuMemoryMiB);
    }
    used = true;
    return true;
  }
};

}  // namespace

ScaleUpPlan planScaleUp(const std::vector<CapacityDemand>& due,
                        const std::vector<CandidateNode>& candidates,
                        const std::vector<Backend>& backends,
                        const std::map<std::string, SystemTime>& coolingDown, SystemTime now,
                        const AutoscaleOptions& options) {
  ScaleUpPlan plan;
  int64_t assumed = 0;
  std::map<std::string, const Backend*> backendOn;
  for (const auto& backend : backends) {
    if (!backend.draining) {
      ++plan.wanted;
    }
    if (backend.load) {
      assumed = std::max(assumed, backend.load->maxSessions);
    }
    backendOn.emplace(backend.node, &backend);
  }
  if (assumed == 0) {
    assumed = options.assumedSessions;
  }

  // Backends on their way: autoscaled nodes without a backend yet, and draining ones.
  std::vector<Bin> bins;
  int64_t autoscaled = 0;
  for (const auto& node : candidates) {
    if (!node.ours()) {
      continue;
    }
    ++autoscaled;
    auto backend = backendOn.find(node.name);
    if (node.draining) {
      int64_t room = assumed;
      if (backend != backendOn.end() && backend->second->load) {
        const auto& load = *backend->second->load;
        room = (load.maxSessions > 0 ? load.maxSessions : assumed) - load.connections;
      }
      bins.emplace_back(Bin::Kind::Draining, &node, room);
    } else if (backend == backendOn.end()) {
      bins.emplace_back(Bin::Kind::Coming, &node, assumed);
    }
  }

  std::set<std::string> taken;
  auto eligible = [&](const CandidateNode& node, std::optional<SystemTime> waitingSince) {
    // An operator's opt-out stands, whatever waits (docs/operations.md).
    if (node.optedIn || node.heldByOperator() || taken.contains(node.name)) {
      return false;
    }
    auto left = coolingDown.find(node.name);
    return left == coolingDown.end() || now - left->second >= options.cooldownOrDefault() ||
           (waitingSince && *waitingSince > left->second);
  };
  auto openNew = [&](const CandidateNode& node) {
    taken.insert(node.name);
    plan.optIn.push_back(node.name);
    bins.emplace_back(Bin::Kind::New, &node, assumed);
    return &bins.back();
  };

  for (size_t i = 0; i < due.size(); ++i) {
    const auto& pod = due[i].requirements;
    Bin* placed = nullptr;
    for (auto& bin : bins) {
      if (bin.kind != Bin::Kind::Unavailable && bin.take(pod)) {
        placed = &bin;
        break;
      }
    }
    if (placed == nullptr && autoscaled + static_cast<int64_t>(plan.optIn.size()) < options.max) {
      // A candidate in the pod's zone first, then by name (the caller's order).
      const CandidateNode* pick = nullptr;
      for (const auto& node : candidates) {
        if (eligible(node, due[i].waitingSince) && Bin(Bin::Kind::New, &node, assumed).place(pod) &&
            (pick == nullptr ||
             (!pod.zone.empty() && node.zone == pod.zone && pick->zone != pod.zone))) {
          pick = &node;
        }
      }
      if (pick != nullptr) {
        placed = openNew(*pick);
        placed->take(pod);
      }
    }
    if (placed == nullptr) {
      ++plan.unserved;
      for (auto& bin : bins) {
        if (bin.kind == Bin::Kind::Unavailable && bin.take(pod)) {
          placed = &bin;
          break;
        }
      }
      if (placed == nullptr) {
        bins.emplace_back(Bin::Kind::Unavailable, nullptr, assumed);
        bins.back().take(pod);
      }
      continue;
    }
    plan.podsOf[placed->node].push_back(i);
    if (placed->kind == Bin::Kind::Draining &&
        std::find(plan.undrain.begin(), plan.undrain.end(), placed->node) == plan.undrain.end()) {
      plan.undrain.push_back(placed->node);
    }
  }

  // The floor, without demand.
  for (const auto& node : candidates) {
    if (autoscaled + static_cast<int64_t>(plan.optIn.size()) >= options.min) {
      break;
    }
    if (eligible(node, std::nullopt)) {
      openNew(node);
    }
  }

  for (const auto& bin : bins) {
    if (bin.kind == Bin::Kind::Coming || bin.kind == Bin::Kind::New ||
        (bin.used && (bin.kind == Bin::Kind::Draining || bin.kind == Bin::Kind::Unavailable))) {
      ++plan.wanted;
    }
  }
  return plan;
}

}  // namespace gvirtus::webhook
