#include "webhook/backend_chooser.h"

#include <algorithm>
#include <memory>
#include <random>

namespace gvirtus::webhook {
namespace {

// One backend that can take the pod, with what ranks it.
struct Candidate {
  const Backend* backend;
  bool fresh;
  int64_t connections;  // reported plus recent assignments
};

std::string plural(int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

BackendChooser::BackendChooser(ChooserOptions options) : options_(std::move(options)) {
  if (!options_.now) {
    options_.now = [] { return std::chrono::system_clock::now(); };
  }
  if (!options_.random) {
    auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
    auto mutex = std::make_shared<std::mutex>();
    options_.random = [engine, mutex] {
      std::lock_guard lock(*mutex);
      return std::uniform_real_distribution<double>(0.0, 1.0)(*engine);
    };
  }
}

void BackendChooser::pruneLocked(TimePoint now) {
  for (auto it = assignments_.begin(); it != assignments_.end();) {
    auto& times = it->second;
    while (!times.empty() && now - times.front() >= options_.assignmentWindow) {
      times.pop_front();
    }
    it = times.empty() ? assignments_.erase(it) : std::next(it);
  }
}

int64_t BackendChooser::recentLocked(const std::string& endpoint) const {
  auto it = assignments_.find(endpoint);
  return it == assignments_.end() ? 0 : static_cast<int64_t>(it->second.size());
}

void BackendChooser::recordAssignment(const std::string& endpoint) {
  std::lock_guard lock(mutex_);
  const auto now = options_.now();
  pruneLocked(now);
  assignments_[endpoint].push_back(now);
}

int64_t BackendChooser::recentAssignments(const std::string& endpoint) {
  std::lock_guard lock(mutex_);
  pruneLocked(options_.now());
  return recentLocked(endpoint);
}

ChooseResult BackendChooser::choose(const std::vector<Backend>& backends,
                                    const BackendRequirements& pod, bool record) {
  std::lock_guard lock(mutex_);
  const auto now = options_.now();
  pruneLocked(now);
  const Policy policy = pod.policy.value_or(options_.policy);

  int64_t gone = 0, full = 0, noMemory = 0, fewGpus = 0, unknown = 0;
  std::vector<Candidate> candidates;
  for (const auto& backend : backends) {
    const auto& load = backend.load;
    const auto age = load && load->updated ? std::optional(now - *load->updated) : std::nullopt;
    if (age && *age > options_.goneAfter) {
      ++gone;
      continue;
    }
    const bool fresh = age && *age <= options_.staleAfter;
    const int64_t connections = (load ? load->connections : 0) + recentLocked(backend.endpoint());
    if (load && load->maxSessions > 0 && connections >= load->maxSessions) {
      ++full;
      continue;
    }
    if ((pod.gpus || pod.gpuMemoryMiB) && !load) {
      ++unknown;
      continue;
    }
    if (pod.gpus && static_cast<int64_t>(load->gpus.size()) < *pod.gpus) {
      ++fewGpus;
      continue;
    }
    if (pod.gpuMemoryMiB &&
        std::none_of(load->gpus.begin(), load->gpus.end(), [&](const GpuLoad& gpu) {
          return gpu.memoryFreeMiB() >= *pod.gpuMemoryMiB;
        })) {
      ++noMemory;
      continue;
    }
    candidates.push_back({&backend, fresh, connections});
  }

  if (candidates.empty()) {
    if (backends.empty()) {
      return std::unexpected(NoBackend{"no GVirtuS backend is ready"});
    }
    std::string reason = "none of " +
                         plural(static_cast<int64_t>(backends.size()), "backend", "backends") +
                         " can take the pod:";
    std::string sep = " ";
    auto add = [&](int64_t n, const std::string& what) {
      if (n > 0) {
        reason += sep + std::to_string(n) + " " + what;
        sep = ", ";
      }
    };
    add(full, "at maxSessions");
    add(noMemory,
        "without a GPU with " + std::to_string(pod.gpuMemoryMiB.value_or(0)) + " MiB free");
    add(fewGpus, "with fewer than " + std::to_string(pod.gpus.value_or(0)) + " GPUs");
    add(unknown, "without a load report to check GPUs against");
    add(gone, "with a load report older than " + formatDuration(options_.goneAfter));
    return std::unexpected(NoBackend{reason});
  }

  // Fresh load reports first; only when none is fresh do unknown ones count.
  const bool anyFresh =
      std::any_of(candidates.begin(), candidates.end(), [](const auto& c) { return c.fresh; });
  std::erase_if(candidates, [&](const Candidate& c) { return anyFresh && !c.fresh; });
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.backend->endpoint() < b.backend->endpoint();
  });
  auto leastConnections = [](const std::vector<Candidate>& from) {
    return std::min_element(
               from.begin(), from.end(),
               [](const auto& a, const auto& b) { return a.connections < b.connections; })
        ->backend;
  };

  const Backend* chosen = nullptr;
  std::string preferredZone;
  switch (policy) {
    case Policy::LeastConnections:
      chosen = leastConnections(candidates);
      break;
    case Policy::RoundRobin:
      chosen = candidates[nextRoundRobin_ % candidates.size()].backend;
      if (record) {
        ++nextRoundRobin_;
      }
      break;
    case Policy::Random: {
      const double r = std::clamp(options_.random(), 0.0, 1.0);
      auto index = static_cast<size_t>(r * static_cast<double>(candidates.size()));
      chosen = candidates[std::min(index, candidates.size() - 1)].backend;
      break;
    }
    case Policy::SameZone: {
      std::vector<Candidate> inZone;
      if (!pod.zone.empty()) {
        std::copy_if(candidates.begin(), candidates.end(), std::back_inserter(inZone),
                     [&](const Candidate& c) { return c.backend->zone == pod.zone; });
      }
      chosen = leastConnections(inZone.empty() ? candidates : inZone);
      preferredZone = chosen->zone;
      break;
    }
  }
  if (record) {
    assignments_[chosen->endpoint()].push_back(now);
  }
  return Choice{*chosen, policy, preferredZone};
}

}  // namespace gvirtus::webhook
