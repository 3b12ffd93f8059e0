#include "webhook/placement/chooser.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string_view>
#include <tuple>

#include <unistd.h>

namespace gvirtus::webhook {
namespace {

// How far ahead of this replica's clock a load report's "updated" may be and still count
// as fresh: the shim's node and this one keep time apart.
constexpr std::chrono::seconds kClockSkew{5};

std::string plural(int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string formatFraction(double value) {
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof text, value);
  return ec == std::errc() ? std::string(text, end) : std::to_string(value);
}

// What the pod asks of one GPU's memory, in words: "16384 MiB", "0.5 of its memory".
std::string memoryWanted(const BackendRequirements& pod) {
  std::string out;
  const int64_t mib = std::max(pod.gpuMemoryMiB.value_or(0), pod.kaiGpuMemoryMiB.value_or(0));
  if (mib > 0) {
    out = std::to_string(mib) + " MiB";
  }
  if (pod.gpuFraction) {
    out += (out.empty() ? "" : " and ") + formatFraction(*pod.gpuFraction) + " of its memory";
  }
  return out;
}

// The host name (a replica's pod name) and a random suffix: two processes on one host differ.
std::string defaultInstance() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) {
    host[0] = '\0';
  }
  char suffix[9];
  std::snprintf(suffix, sizeof suffix, "%08x", static_cast<unsigned>(std::random_device{}()));
  return (host[0] != '\0' ? std::string(host) + "-" : std::string()) + suffix;
}

}  // namespace

struct BackendChooser::Candidate {
  const Backend* backend;
  std::string endpoint;  // backend->endpoint(), built once
  bool fresh;
  int64_t connections;  // reported plus recent assignments
  int64_t own = 0;      // of those, this instance's
  std::optional<int64_t> gpuIndex;
  int64_t memoryMiB = 0;
  // Breaks ties in least-connections (TieOrder).
  size_t tieRank = 0;
};

struct BackendChooser::Refusals {
  int64_t gone = 0, full = 0, noMemory = 0, fewGpus = 0, unknown = 0, draining = 0;
};

BackendChooser::BackendChooser(ChooserOptions options) : options_(std::move(options)) {
  if (options_.instance.empty()) {
    options_.instance = defaultInstance();
  }
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
  const Duration window = options_.assignmentWindow;
  const Duration unconfirmed = options_.unconfirmedLifetime > Duration::zero()
                                   ? std::min(options_.unconfirmedLifetime, window)
                                   : window;
  for (auto it = assignments_.begin(); it != assignments_.end();) {
    auto& reservations = it->second;
    while (!reservations.empty() && now - reservations.front().at >= window) {
      unmatchLocked(it->first, reservations.front().seenAs.empty() ? 0 : 1);
      reservations.pop_front();
    }
    // In time order: when the oldest unconfirmed one still counts, all of them do. (An
    // unconfirmed one was never matched: nothing to unmatch.)
    auto oldest =
        std::ranges::find_if(reservations, [](const Reservation& r) { return !r.confirmed; });
    if (oldest != reservations.end() && now - oldest->at >= unconfirmed) {
      std::erase_if(reservations, [&](const Reservation& r) {
        return !r.confirmed && now - r.at >= unconfirmed;
      });
    }
    it = reservations.empty() ? assignments_.erase(it) : std::next(it);
  }
}

void BackendChooser::confirmLocked(const Backend& backend) {
  if (backend.assigned.empty()) {
    return;
  }
  auto it = assignments_.find(backend.endpoint());
  if (it == assignments_.end()) {
    return;
  }
  auto& reservations = it->second;
  auto oldest =
      std::ranges::find_if(reservations, [](const Reservation& r) { return !r.confirmed; });
  if (oldest == reservations.end()) {
    return;
  }
  // This instance's pods of the backend not yet matched to an assignment, created no
  // earlier than the oldest unconfirmed one could be (a creationTimestamp is in whole
  // seconds, from the API server's clock, and set after the review).
  constexpr auto kCreationSlack = std::chrono::seconds(2);
  std::vector<std::string_view> seen;
  for (const auto& r : reservations) {
    if (!r.seenAs.empty()) {
      seen.push_back(r.seenAs);
    }
  }
  std::vector<const AssignedPod*> unmatched;
  for (const auto& pod : backend.assigned) {
    if (pod.assignedBy == options_.instance && !pod.pod.empty() &&
        pod.created >= oldest->at - kCreationSlack &&
        std::ranges::find(seen, std::string_view(pod.pod)) == seen.end()) {
      unmatched.push_back(&pod);
    }
  }
  auto confirm = [&](Reservation& r, auto match) {
    auto found = std::ranges::find_if(unmatched, match);
    if (found != unmatched.end()) {
      r.confirmed = true;
      r.seenAs = (*found)->pod;
      ++matched_[backend.endpoint()];
      unmatched.erase(found);
    }
  };
  // By name first: a pod named in its review confirms only its own assignment. Then the
  // pods reviewed without a name (generateName), each confirming one assignment made
  // before it was created.
  for (auto r = oldest; r != reservations.end() && !unmatched.empty(); ++r) {
    if (!r->confirmed && !r->pod.empty()) {
      confirm(*r, [&](const AssignedPod* pod) { return pod->pod == r->pod; });
    }
  }
  for (auto r = oldest; r != reservations.end() && !unmatched.empty(); ++r) {
    if (!r->confirmed && r->pod.empty()) {
      confirm(*r, [&](const AssignedPod* pod) { return pod->created >= r->at - kCreationSlack; });
    }
  }
}

void BackendChooser::forgetGoneLocked(const Backend& backend, TimePoint now) {
  auto matched = matched_.find(backend.endpoint());
  auto it = assignments_.find(backend.endpoint());
  if (matched == matched_.end() || it == assignments_.end()) {
    return;
  }
  // A lookup per reservation in the list's index by name, not a walk of every pod.
  auto listedNow = [&](const Reservation& r) -> const AssignedPod* {
    return r.seenAs.empty() ? nullptr : backend.assignedPod(r.seenAs);
  };
  // The list leaves out pods created before the window, as of when it was built (a
  // snapshot a few seconds old at most): such an absence says nothing.
  constexpr auto kListSlack = std::chrono::seconds(5);
  const Duration window = options_.assignmentWindow;
  // A pod deleted or finished holds no session, like one being deleted (which
  // Backend::assigned leaves out): counting it for the rest of the window would steer the
  // next pods away from a backend for nothing. One never listed yet (released, and the
  // cache has not caught up) still counts.
  const size_t forgotten = std::erase_if(it->second, [&](const Reservation& r) {
    return r.listedCreated && now - *r.listedCreated < window - kListSlack &&
           listedNow(r) == nullptr;
  });
  unmatchLocked(backend.endpoint(), forgotten);  // listedCreated: matched
  for (auto& r : it->second) {
    if (const AssignedPod* pod = listedNow(r)) {
      r.listedCreated = pod->created;
    }
  }
  if (it->second.empty()) {
    assignments_.erase(it);
  }
}

int64_t BackendChooser::recentLocked(const std::string& endpoint) const {
  auto it = assignments_.find(endpoint);
  return it == assignments_.end() ? 0 : static_cast<int64_t>(it->second.size());
}

int64_t BackendChooser::assignedElsewhere(const Backend& backend, TimePoint now) const {
  return std::ranges::count_if(backend.assigned, [&](const AssignedPod& pod) {
    return pod.assignedBy != options_.instance && now - pod.created < options_.assignmentWindow;
  });
}

int64_t BackendChooser::takenLocked(const Backend& backend, const GpuLoad& gpu) const {
  int64_t held = 0;
  for (const auto& share : backend.shares) {
    if (share.gpuIndex == gpu.index) {
      held += memoryDemandMiB(share.demand, gpu.memoryTotalMiB);
    }
  }
  // A share is what its pod may use: its use so far is within it, not beside it.
  int64_t taken = std::max(gpu.memoryUsedMiB, held);
  auto it = assignments_.find(backend.endpoint());
  for (size_t i = 0; it != assignments_.end() && i < it->second.size(); ++i) {
    const Reservation& recent = it->second[i];
    const bool shared =
        !recent.pod.empty() && std::ranges::any_of(backend.shares, [&](const GpuShare& share) {
          return share.pod == recent.pod;
        });
    if (recent.gpuIndex == gpu.index && !shared) {
      taken += recent.memoryMiB;
    }
  }
  return taken;
}

void BackendChooser::recordAssignment(const std::string& endpoint) {
  std::lock_guard lock(mutex_);
  const auto now = options_.now();
  pruneLocked(now);
  assignments_[endpoint].push_back({.at = now,
                                    .id = nextReservation_++,
                                    .gpuIndex = std::nullopt,
                                    .memoryMiB = 0,
                                    .pod = "",
                                    .confirmed = true,
                                    .seenAs = "",
                                    .listedCreated = std::nullopt});
}

BackendChooser::Reservation* BackendChooser::findLocked(const Choice& choice) {
  auto it = assignments_.find(choice.backend.endpoint());
  if (choice.reservation == 0 || it == assignments_.end()) {
    return nullptr;
  }
  auto found = std::ranges::find(it->second, choice.reservation, &Reservation::id);
  return found == it->second.end() ? nullptr : &*found;
}

void BackendChooser::unmatchLocked(const std::string& endpoint, size_t count) {
  auto it = matched_.find(endpoint);
  if (count == 0 || it == matched_.end()) {
    return;
  }
  it->second -= std::min(count, it->second);
  if (it->second == 0) {
    matched_.erase(it);
  }
}

void BackendChooser::cancelAssignment(const Choice& choice) {
  std::lock_guard lock(mutex_);
  if (const Reservation* found = findLocked(choice)) {
    unmatchLocked(choice.backend.endpoint(), found->seenAs.empty() ? 0 : 1);
    auto it = assignments_.find(choice.backend.endpoint());
    std::erase_if(it->second, [&](const Reservation& r) { return r.id == choice.reservation; });
    if (it->second.empty()) {
      assignments_.erase(it);
    }
  }
}

void BackendChooser::confirmAssignment(const Choice& choice) {
  std::lock_guard lock(mutex_);
  if (Reservation* r = findLocked(choice)) {
    r->confirmed = true;
    // Its pod, seen in the cluster later, confirms nothing else.
    const bool wasMatched = !r->seenAs.empty();
    r->seenAs = r->pod;
    if (!wasMatched && !r->seenAs.empty()) {
      ++matched_[choice.backend.endpoint()];
    } else if (wasMatched && r->seenAs.empty()) {
      unmatchLocked(choice.backend.endpoint(), 1);
    }
  }
}

int64_t BackendChooser::recentAssignments(const std::string& endpoint) {
  std::lock_guard lock(mutex_);
  pruneLocked(options_.now());
  return recentLocked(endpoint);
}

int64_t BackendChooser::unconfirmedAssignments(const std::string& endpoint) {
  std::lock_guard lock(mutex_);
  pruneLocked(options_.now());
  auto it = assignments_.find(endpoint);
  return it == assignments_.end()
             ? 0
             : std::ranges::count_if(it->second, [](const auto& r) { return !r.confirmed; });
}

ChooseResult BackendChooser::choose(const std::vector<Backend>& backends,
                                    const BackendRequirements& pod, bool record) {
  std::lock_guard lock(mutex_);
  const auto now = options_.now();
  // Before the pruning: an assignment whose pod shows up now holds, however late it is seen.
  for (const auto& backend : backends) {
    confirmLocked(backend);
    forgetGoneLocked(backend, now);
  }
  pruneLocked(now);
  const Policy policy = pod.policy.value_or(options_.policy);
  const TieOrder tieOrder = tieOrder_.load(std::memory_order_relaxed);
  Refusals refusals;
  std::vector<Candidate> candidates = filterLocked(backends, pod, now, tieOrder, refusals);
  if (candidates.empty()) {
    return std::unexpected(NoBackend{refusalReason(backends.size(), refusals, pod)});
  }
  const Candidate chosen = pickLocked(std::move(candidates), policy, pod, tieOrder, record);
  return reserveLocked(chosen, policy, pod, now, record);
}

std::vector<BackendChooser::Candidate> BackendChooser::filterLocked(
    const std::vector<Backend>& backends, const BackendRequirements& pod, TimePoint now,
    TieOrder tieOrder, Refusals& refusals) const {
  const bool wantsMemory = asksForGpuMemory(pod);
  std::vector<Candidate> candidates;
  for (const auto& backend : backends) {
    if (backend.draining) {
      ++refusals.draining;
      continue;
    }
    const auto& load = backend.load;
    const auto age = load && load->updated ? std::optional(now - *load->updated) : std::nullopt;
    if (age && *age > options_.goneAfter) {
      ++refusals.gone;
      continue;
    }
    // A report from the future is no fresher than a stale one: a shim that dates its report
    // ahead (a wrong clock, or a taken shim) would otherwise stay fresh for ever.
    const bool fresh = age && *age >= -kClockSkew && *age <= options_.staleAfter;
    std::string endpoint = backend.endpoint();
    const int64_t own = recentLocked(endpoint);
    // The backend's own report, plus what it cannot have seen yet; never fewer than the live
    // pods wired to it (a taken shim could report none, and draw every new pod).
    const int64_t connections = std::max(
        (load ? load->connections : 0) + own + assignedElsewhere(backend, now), backend.wired);
    if (load && load->maxSessions > 0 && connections >= load->maxSessions) {
      ++refusals.full;
      continue;
    }
    if ((pod.gpus || wantsMemory) && !load) {
      ++refusals.unknown;
      continue;
    }
    if (pod.gpus && static_cast<int64_t>(load->gpus.size()) < *pod.gpus) {
      ++refusals.fewGpus;
      continue;
    }
    // TieOrder::Own: replicas that choose at once, before each sees the other's choice, then
    // mostly choose apart among equals instead of piling onto the same lowest endpoint.
    const size_t tieRank = tieOrder == TieOrder::Own
                               ? std::hash<std::string>{}(options_.instance + "/" + endpoint)
                               : 0;
    Candidate candidate{&backend, std::move(endpoint), fresh, connections,
                        own,      std::nullopt,        0,     tieRank};
    if (wantsMemory) {
      // The GPU with the most memory left after shares and own recent assignments, among
      // those with enough.
      int64_t bestLeft = -1;
      for (const auto& gpu : load->gpus) {
        const int64_t demand = memoryDemandMiB(pod, gpu.memoryTotalMiB);
        const int64_t left = gpu.memoryTotalMiB - takenLocked(backend, gpu);
        if (left >= demand && left > bestLeft) {
          bestLeft = left;
          candidate.gpuIndex = gpu.index;
          candidate.memoryMiB = demand;
        }
      }
      if (!candidate.gpuIndex) {
        ++refusals.noMemory;
        continue;
      }
    }
    candidates.push_back(std::move(candidate));
  }
  return candidates;
}

std::string BackendChooser::refusalReason(size_t total, const Refusals& refusals,
                                          const BackendRequirements& pod) const {
  if (total == 0) {
    return "no GVirtuS backend is ready";
  }
  std::string reason = "none of " + plural(static_cast<int64_t>(total), "backend", "backends") +
                       " can take the pod:";
  std::string sep = " ";
  auto add = [&](int64_t n, const std::string& what) {
    if (n > 0) {
      reason += sep + std::to_string(n) + " " + what;
      sep = ", ";
    }
  };
  add(refusals.full, "at maxSessions");
  add(refusals.noMemory, "without a GPU with " + memoryWanted(pod) + " free");
  add(refusals.fewGpus, "with fewer than " + std::to_string(pod.gpus.value_or(0)) + " GPUs");
  add(refusals.unknown, "without a load report to check GPUs against");
  add(refusals.gone, "with a load report older than " + formatDuration(options_.goneAfter));
  add(refusals.draining, "draining before the autoscaler opts their node out");
  return reason;
}

BackendChooser::Candidate BackendChooser::pickLocked(std::vector<Candidate> candidates,
                                                     Policy policy, const BackendRequirements& pod,
                                                     TieOrder tieOrder, bool record) {
  // Fresh load reports first; only when none is fresh do unknown ones count.
  const bool anyFresh =
      std::any_of(candidates.begin(), candidates.end(), [](const auto& c) { return c.fresh; });
  std::erase_if(candidates, [&](const Candidate& c) { return anyFresh && !c.fresh; });
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.endpoint < b.endpoint; });
  if (tieOrder != TieOrder::Own) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      candidates[i].tieRank = tieOrder == TieOrder::Ascending ? i : candidates.size() - 1 - i;
    }
  }
  // Among backends with as many connections, the one this instance gave fewer pods lately:
  // the other replicas' latest choices, not visible yet, more likely went to the others.
  auto leastConnections = [](const std::vector<Candidate>& from) {
    return *std::min_element(from.begin(), from.end(), [](const auto& a, const auto& b) {
      return std::tie(a.connections, a.own, a.tieRank) < std::tie(b.connections, b.own, b.tieRank);
    });
  };
  switch (policy) {
    case Policy::LeastConnections:
      break;
    case Policy::RoundRobin: {
      const Candidate chosen = candidates[nextRoundRobin_ % candidates.size()];
      if (record) {
        ++nextRoundRobin_;
      }
      return chosen;
    }
    case Policy::Random: {
      const double r = std::clamp(options_.random(), 0.0, 1.0);
      auto index = static_cast<size_t>(r * static_cast<double>(candidates.size()));
      return candidates[std::min(index, candidates.size() - 1)];
    }
    case Policy::SameZone: {
      std::vector<Candidate> inZone;
      if (!pod.zone.empty()) {
        std::copy_if(candidates.begin(), candidates.end(), std::back_inserter(inZone),
                     [&](const Candidate& c) { return c.backend->zone == pod.zone; });
      }
      return leastConnections(inZone.empty() ? candidates : inZone);
    }
  }
  return leastConnections(candidates);
}

Choice BackendChooser::reserveLocked(const Candidate& chosen, Policy policy,
                                     const BackendRequirements& pod, TimePoint now, bool record) {
  // Same zone: the chosen backend's zone becomes the pod's preferred zone.
  std::string preferredZone = policy == Policy::SameZone ? chosen.backend->zone : "";
  Choice choice{chosen.backend->withoutPods(),
                policy,
                std::move(preferredZone),
                chosen.gpuIndex,
                chosen.memoryMiB,
                0};
  if (record) {
    choice.reservation = nextReservation_++;
    assignments_[chosen.endpoint].push_back({.at = now,
                                             .id = choice.reservation,
                                             .gpuIndex = chosen.gpuIndex,
                                             .memoryMiB = chosen.memoryMiB,
                                             .pod = pod.pod,
                                             .confirmed = false,
                                             .seenAs = "",
                                             .listedCreated = std::nullopt});
  }
  return choice;
}

}  // namespace gvirtus::webhook
