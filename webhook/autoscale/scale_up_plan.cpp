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

// planScaleUp's steps over what they share: the bins (backends on their way, nodes opted in
// by this plan, pods nowhere), the nodes taken, the sessions a new backend is assumed to take.
class ScaleUpPlanner {
 public:
  ScaleUpPlanner(const std::vector<CandidateNode>& candidates,
                 const std::map<std::string, SystemTime>& coolingDown, SystemTime now,
                 const AutoscaleOptions& options)
      : candidates_(candidates), coolingDown_(coolingDown), now_(now), options_(options) {}

  // The backends serving now (counted wanted unless draining), the sessions each takes, and
  // the backends on their way: autoscaled nodes without a backend yet, and draining ones.
  void countBackends(const std::vector<Backend>& backends) {
    std::map<std::string, const Backend*> backendOn;
    for (const auto& backend : backends) {
      if (!backend.draining) {
        ++plan_.wanted;
      }
      if (backend.load) {
        assumed_ = std::max(assumed_, backend.load->maxSessions);
      }
      backendOn.emplace(backend.node, &backend);
    }
    if (assumed_ == 0) {
      assumed_ = options_.assumedSessions;
    }
    for (const auto& node : candidates_) {
      if (!node.ours()) {
        continue;
      }
      ++autoscaled_;
      auto backend = backendOn.find(node.name);
      if (node.draining) {
        int64_t room = assumed_;
        if (backend != backendOn.end() && backend->second->load) {
          const auto& load = *backend->second->load;
          room = (load.maxSessions > 0 ? load.maxSessions : assumed_) - load.connections;
        }
        bins_.emplace_back(Bin::Kind::Draining, &node, room);
      } else if (backend == backendOn.end()) {
        bins_.emplace_back(Bin::Kind::Coming, &node, assumed_);
      }
    }
  }

  // Pod `index` of the demand: into a bin on its way, else onto a candidate opted in for it,
  // else unserved (into a bin of pods nowhere, so that they count as backends wanted).
  void place(const CapacityDemand& demand, size_t index) {
    const auto& pod = demand.requirements;
    Bin* placed = takenBy(pod, false);
    if (placed == nullptr &&
        autoscaled_ + static_cast<int64_t>(plan_.optIn.size()) < options_.max) {
      if (const CandidateNode* pick = pickCandidate(pod, demand.waitingSince)) {
        placed = openNew(*pick);
        placed->take(pod);
      }
    }
    if (placed == nullptr) {
      ++plan_.unserved;
      if (takenBy(pod, true) == nullptr) {
        bins_.emplace_back(Bin::Kind::Unavailable, nullptr, assumed_);
        bins_.back().take(pod);
      }
      return;
    }
    plan_.podsOf[placed->node].push_back(index);
    if (placed->kind == Bin::Kind::Draining && std::find(plan_.undrain.begin(), plan_.undrain.end(),
                                                         placed->node) == plan_.undrain.end()) {
      plan_.undrain.push_back(placed->node);
    }
  }

  // The floor, without demand.
  void keepFloor() {
    for (const auto& node : candidates_) {
      if (autoscaled_ + static_cast<int64_t>(plan_.optIn.size()) >= options_.min) {
        break;
      }
      if (eligible(node, std::nullopt)) {
        openNew(node);
      }
    }
  }

  ScaleUpPlan finish() {
    for (const auto& bin : bins_) {
      if (bin.kind == Bin::Kind::Coming || bin.kind == Bin::Kind::New ||
          (bin.used && (bin.kind == Bin::Kind::Draining || bin.kind == Bin::Kind::Unavailable))) {
        ++plan_.wanted;
      }
    }
    return std::move(plan_);
  }

 private:
  // The first bin that takes the pod: among the pods nowhere (`unavailable`), or the others.
  Bin* takenBy(const BackendRequirements& pod, bool unavailable) {
    for (auto& bin : bins_) {
      if ((bin.kind == Bin::Kind::Unavailable) == unavailable && bin.take(pod)) {
        return &bin;
      }
    }
    return nullptr;
  }

  // A candidate in the pod's zone first, then by name (the caller's order).
  const CandidateNode* pickCandidate(const BackendRequirements& pod,
                                     std::optional<SystemTime> waitingSince) {
    const CandidateNode* pick = nullptr;
    for (const auto& node : candidates_) {
      if (eligible(node, waitingSince) && Bin(Bin::Kind::New, &node, assumed_).place(pod) &&
          (pick == nullptr ||
           (!pod.zone.empty() && node.zone == pod.zone && pick->zone != pod.zone))) {
        pick = &node;
      }
    }
    return pick;
  }

  bool eligible(const CandidateNode& node, std::optional<SystemTime> waitingSince) const {
    // An operator's opt-out stands, whatever waits (docs/operations.md).
    if (node.optedIn || node.heldByOperator() || taken_.contains(node.name)) {
      return false;
    }
    auto left = coolingDown_.find(node.name);
    return left == coolingDown_.end() || now_ - left->second >= options_.cooldownOrDefault() ||
           (waitingSince && *waitingSince > left->second);
  }

  Bin* openNew(const CandidateNode& node) {
    taken_.insert(node.name);
    plan_.optIn.push_back(node.name);
    bins_.emplace_back(Bin::Kind::New, &node, assumed_);
    return &bins_.back();
  }

  const std::vector<CandidateNode>& candidates_;
  const std::map<std::string, SystemTime>& coolingDown_;
  const SystemTime now_;
  const AutoscaleOptions& options_;
  ScaleUpPlan plan_;
  int64_t assumed_ = 0;
  int64_t autoscaled_ = 0;
  std::vector<Bin> bins_;
  std::set<std::string> taken_;
};

}  // namespace

ScaleUpPlan planScaleUp(const std::vector<CapacityDemand>& due,
                        const std::vector<CandidateNode>& candidates,
                        const std::vector<Backend>& backends,
                        const std::map<std::string, SystemTime>& coolingDown, SystemTime now,
                        const AutoscaleOptions& options) {
  ScaleUpPlanner planner(candidates, coolingDown, now, options);
  planner.countBackends(backends);
  for (size_t i = 0; i < due.size(); ++i) {
    planner.place(due[i], i);
  }
  planner.keepFloor();
  return planner.finish();
}

}  // namespace gvirtus::webhook
