#include "webhook/release/pass.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/base/json_access.h"
#include "common/base/parallel.h"
#include "common/cache/object_cache.h"
#include "common/contract/backend_requirements.h"
#include "common/contract/scheduling_gate.h"
#include "common/time/time_text.h"
#include "webhook/base/names.h"
#include "webhook/placement/assigner.h"

// Gangs and failed writes. A release patch removes the scheduling gate, and a gate cannot
// be added back to a pod (the API server refuses it), so a released member cannot be rolled
// back. A pass therefore
// - writes a gang's first member before the others, and writes the others only when it was
//   released: a write the API server refuses for every member (a policy, a lost leader's
//   credentials, an API server going away) leaves the gang whole and unreleased;
// - writes a member that failed once more, at once, when others of its gang are released
//   (unless the pod changed meanwhile: its change starts the next pass, which reads it
//   again), and keeps its backend from the rest of the pass (the chooser counts it until
//   the pass ends), so that the next pass finds the room it needs;
// and a gang left partly released (by an earlier sync, or a leader that went away) is
// completed: each member is released as soon as a backend can take it (in a pass over
// several units, before the others). The usual rule (the whole gang fits, or none of it
// goes) would leave such a gang half released while other pods take the backends it waits
// for, one by one; its released members already hold their sessions, so releasing the rest
// as room appears is the only way the gang gets whole. Writes a pass began are finished
// even when it is asked to stop (leadership lost): a gang is not cut between its first
// member and the others, and a pod is never written twice (the patches' `test` operations
// refuse a pod changed since).
namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// One unit of a pass: a pod alone, or the waiting members of a gang.
struct ReleaseUnit {
  std::vector<ObjectSnapshot> pods;
  std::optional<Gang> gang;
  // Members of the gang no longer wait: it is completed, not released whole.
  bool completing() const { return gang && gang->others > 0; }
};

// The pass's units: gangs being completed first, then the others, each in the order of its
// oldest pod (`waiting` is oldest first).
std::vector<ReleaseUnit> releaseUnits(const std::vector<ObjectSnapshot>& waiting,
                                      const GangLookup& gangOf) {
  std::vector<ReleaseUnit> units;
  std::map<std::string, size_t> unitOfGang;
  for (const ObjectSnapshot& pod : waiting) {
    std::optional<Gang> gang = gangOf ? gangOf(*pod) : std::nullopt;
    if (!gang || (gang->minMember <= 1 && !gang->unseen)) {
      units.push_back({{pod}, std::nullopt});
      continue;
    }
    auto [it, added] = unitOfGang.emplace(gang->name, units.size());
    if (added) {
      units.push_back({{}, std::move(gang)});
    }
    units[it->second].pods.push_back(pod);
  }
  std::stable_partition(units.begin(), units.end(),
                        [](const ReleaseUnit& unit) { return unit.completing(); });
  return units;
}

// A pod that waits, and why.
PodOutcome waits(ObjectSnapshot pod, std::string reason, bool forCapacity) {
  PodOutcome outcome;
  outcome.pod = std::move(pod);
  outcome.reason = std::move(reason);
  outcome.forCapacity = forCapacity;
  return outcome;
}

PodOutcome refused(ObjectSnapshot pod) {
  PodOutcome outcome;
  outcome.kind = PodOutcome::Kind::Refused;
  outcome.pod = std::move(pod);
  outcome.reason = "it carries the scheduling gate " + std::string(kSchedulingGate) +
                   " but was not wired by the GVirtuS webhook at creation (no " +
                   std::string(kEnabledLabel) +
                   "=true label then); it is not given a backend: delete it and create it "
                   "with the label";
  return outcome;
}

// The assigner's answer for a waiting pod. A pod whose annotations do not parse waits with
// their error, and asks no backend for room (Kind::Error). What it asks goes to `asked`
// where one is given.
AssignResult assignWaiting(BackendAssigner& assigner, const std::vector<Backend>& backends,
                           const json& pod, std::optional<BackendRequirements>* asked = nullptr) {
  auto requirements = requirementsFromPod(pod);
  if (!requirements) {
    return std::unexpected(
        NotAssigned{.kind = NotAssigned::Kind::Error, .reason = requirements.error().message});
  }
  AssignResult assigned =
      assigner.assign(backends, *requirements, {.pinned = std::nullopt, .podExists = true});
  if (asked != nullptr) {
    *asked = std::move(*requirements);
  }
  return assigned;
}

// Releases chosen per writer before a batch is written (pass.h).
constexpr size_t kBatchPerWriter = 8;

// A release chosen but not written yet: outcomes[index] waits for its write's result.
struct PendingRelease {
  // Lead: a gang's first member, written before its Followers. Completing: a member of a
  // gang others of which were released before.
  enum class Role { Alone, Lead, Follower, Completing };
  size_t index;
  JsonPatch patch;
  size_t unit;  // the unit's number in the pass
  Role role;
};

class ReleasePass {
 public:
  ReleasePass(const std::vector<Backend>& backends, BackendChooser& chooser,
              const std::vector<std::string>& plugins, const ReleaseWriter& write,
              size_t parallelWrites)
      : backends_(backends),
        chooser_(chooser),
        assigner_(chooser, plugins),
        write_(write),
        parallel_(std::max<size_t>(parallelWrites, 1)),
        batch_(parallel_ == 1 ? 1 : parallel_ * kBatchPerWriter) {}

  std::vector<PodOutcome> run(const std::vector<ObjectSnapshot>& waiting, std::stop_token stop,
                              const GangLookup& gangOf) {
    // Only pods the webhook wired and gated: a pod created with the gate but without the
    // label, and labelled later, was never wired, and would reach a backend without the
    // webhook's checks.
    std::vector<ObjectSnapshot> wired;
    for (const auto& pod : waiting) {
      if (gatedByWebhook(*pod)) {
        wired.push_back(pod);
      } else {
        outcomes_.push_back(refused(pod));
      }
    }
    const auto units = releaseUnits(wired, gangOf);
    for (size_t u = 0; u < units.size() && !stop.stop_requested(); ++u) {
      if (!choose(units[u], u)) {
        writePending();
        choose(units[u], u);
      }
      if (pending_.size() >= batch_) {
        writePending();
      }
    }
    writePending();
    for (const auto& choice : held_) {
      chooser_.cancelAssignment(choice);
    }
    return std::move(outcomes_);
  }

 private:
  // Chooses a backend for the unit's pods; what can go is added to pending_, the rest waits.
  // Decides nothing and returns false when one of them found no room while writes are
  // pending: a write that fails gives its backend back, so the unit is judged once they
  // are written (a pod waits for room only when no earlier write could still free some).
  bool choose(const ReleaseUnit& unit, size_t number) {
    std::vector<std::optional<Assigned>> choices(unit.pods.size());
    // A gang being completed: its members no backend can take now wait, the others go.
    std::vector<std::optional<PodOutcome>> left(unit.pods.size());
    std::string reason;
    bool forCapacity = false;
    const int members = static_cast<int>(unit.pods.size()) + (unit.gang ? unit.gang->others : 0);
    if (unit.gang && unit.gang->unseen) {
      reason = "its PodGroup " + unit.gang->name + " is not seen yet";
    } else if (unit.gang && members < unit.gang->minMember) {
      reason = "gang " + unit.gang->name + " has " + std::to_string(members) + " of its " +
               std::to_string(unit.gang->minMember) + " pods";
    }
    size_t chosen = 0;
    bool foundNoRoom = false;
    for (size_t i = 0; i < unit.pods.size() && reason.empty(); ++i) {
      // A pod whose properties.json cannot be rendered waits too (logged by the controller
      // with its reason): a gang is not half released for it.
      AssignResult assigned = assignWaiting(assigner_, backends_, *unit.pods[i]);
      const bool noRoom = !assigned && assigned.error().kind == NotAssigned::Kind::Waits;
      foundNoRoom = foundNoRoom || noRoom;
      if (assigned) {
        choices[i] = std::move(*assigned);
        ++chosen;
      } else if (unit.completing()) {
        left[i] = waits(unit.pods[i],
                        "gang " + unit.gang->name + " is being completed (" +
                            std::to_string(unit.gang->others) +
                            " of its pods released before): " + assigned.error().reason,
                        noRoom);
      } else {
        // Only a pod no backend has room for asks the autoscaler for one: not a pod whose
        // annotations are wrong, nor one whose properties.json cannot be rendered.
        forCapacity = noRoom;
        reason = !unit.gang
                     ? assigned.error().reason
                     : "gang " + unit.gang->name + " is released whole and only " +
                           std::to_string(chosen) + " of its " + std::to_string(unit.pods.size()) +
                           " waiting pods can get a backend (" + assigned.error().reason + ")";
      }
    }
    if (foundNoRoom && !pending_.empty()) {
      for (const auto& choice : choices) {
        if (choice) {
          giveBack(choice->choice);
        }
      }
      return false;
    }
    if (!reason.empty()) {
      for (size_t i = 0; i < unit.pods.size(); ++i) {
        if (choices[i]) {
          giveBack(choices[i]->choice);
        }
        outcomes_.push_back(waits(unit.pods[i], reason, forCapacity));
      }
      return true;
    }
    using Role = PendingRelease::Role;
    bool first = true;
    for (size_t i = 0; i < unit.pods.size(); ++i) {
      if (left[i]) {
        outcomes_.push_back(std::move(*left[i]));
        continue;
      }
      const Role role = !unit.gang          ? Role::Alone
                        : unit.completing() ? Role::Completing
                        : first             ? Role::Lead
                                            : Role::Follower;
      first = false;
      PodOutcome outcome;
      outcome.pod = unit.pods[i];
      outcome.kind = PodOutcome::Kind::Failed;  // until its write succeeds
      outcome.choice = std::move(choices[i]->choice);
      pending_.push_back(
          {outcomes_.size(), releasePatch(*outcome.pod, choices[i]->assignment), number, role});
      outcomes_.push_back(std::move(outcome));
    }
    return true;
  }

  // Gives a chosen backend back: the pods chosen after it may take it.
  void giveBack(const Choice& choice) { chooser_.cancelAssignment(choice); }

  // Writes the listed pending releases, parallel_ at a time.
  void writeSome(const std::vector<size_t>& which, std::vector<std::optional<Result<void>>>& out) {
    forEachParallel(which.size(), parallel_, [&](size_t k) {
      const PendingRelease& release = pending_[which[k]];
      out[which[k]] = write_(*outcomes_[release.index].pod, release.patch);
    });
  }

  // Writes what is pending (pass.cpp's first comment: the order and the retry); a
  // failed write gives its backend back to the pods chosen after this, unless its gang is
  // partly released.
  void writePending() {
    using Role = PendingRelease::Role;
    std::vector<std::optional<Result<void>>> written(pending_.size());
    auto select = [&](auto wanted) {
      std::vector<size_t> which;
      for (size_t i = 0; i < pending_.size(); ++i) {
        if (wanted(i)) {
          which.push_back(i);
        }
      }
      return which;
    };
    writeSome(select([&](size_t i) { return pending_[i].role != Role::Follower; }), written);
    std::map<size_t, size_t> refusedLead;  // unit -> its lead, not released
    std::set<size_t> partly;               // units with a member released
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (pending_[i].role == Role::Lead && !*written[i]) {
        refusedLead.emplace(pending_[i].unit, i);
      }
    }
    writeSome(select([&](size_t i) {
                return pending_[i].role == Role::Follower &&
                       !refusedLead.contains(pending_[i].unit);
              }),
              written);
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (pending_[i].role == Role::Completing || (written[i] && *written[i])) {
        partly.insert(pending_[i].unit);
      }
    }
    // Once more, at once: a member of a partly released gang whose write failed for another
    // reason than a change of the pod (the next pass reads a changed pod again).
    writeSome(select([&](size_t i) {
                const auto& result = written[i];
                return pending_[i].role != Role::Alone && partly.contains(pending_[i].unit) &&
                       result && !*result && !isReleaseConflict(result->error()) &&
                       !result->error().isNotFound();
              }),
              written);
    const auto at = std::chrono::system_clock::now();
    for (size_t i = 0; i < pending_.size(); ++i) {
      PodOutcome& outcome = outcomes_[pending_[i].index];
      if (!written[i]) {
        const size_t lead = refusedLead.at(pending_[i].unit);
        outcome.error = written[lead]->error().context(
            "not written, so that the gang stays whole: its first member " +
            cacheKey(*outcomes_[pending_[lead].index].pod) + " was not released");
        giveBack(*outcome.choice);
      } else if (*written[i]) {
        outcome.kind = PodOutcome::Kind::Released;
        outcome.at = at;
      } else {
        outcome.error = written[i]->error();
        if (pending_[i].role != Role::Alone && partly.contains(pending_[i].unit)) {
          held_.push_back(*outcome.choice);
        } else {
          giveBack(*outcome.choice);
        }
      }
    }
    pending_.clear();
  }

  const std::vector<Backend>& backends_;
  BackendChooser& chooser_;
  BackendAssigner assigner_;
  const ReleaseWriter& write_;
  size_t parallel_;
  // Releases chosen before they are written: parallel_ writers draw from a batch, so a
  // slow write holds up only its own writer until the batch ends (with a batch of
  // parallel_, every batch waited for its slowest write: 10 pods/s where the API server's
  // mean of 212 ms allowed 38, bench-scale at c858aca).
  size_t batch_;
  std::vector<PodOutcome> outcomes_;
  std::vector<PendingRelease> pending_;
  // Backends of the members of partly released gangs whose writes failed: kept from the
  // rest of the pass, given back when it ends.
  std::vector<Choice> held_;
};

}  // namespace

std::chrono::system_clock::time_point createdAt(const json& pod) {
  auto parsed = parseRfc3339(stringAt(pod, {"metadata", "creationTimestamp"}));
  return parsed ? *parsed : std::chrono::system_clock::time_point::max();
}

std::string podUid(const json& pod) {
  const std::string uid = stringAt(pod, {"metadata", "uid"});
  return uid.empty() ? cacheKey(pod) : uid;
}

JsonPatch releasePatch(const json& pod, const Assignment& assignment) {
  JsonPatch patch;
  const std::string resourceVersion = stringAt(pod, {"metadata", "resourceVersion"});
  if (!resourceVersion.empty()) {
    patch.test(jsonPointer({"metadata", "resourceVersion"}), resourceVersion);
  }
  if (auto index = backendGateIndex(pod)) {
    patch.test(jsonPointer({"spec", "schedulingGates", std::to_string(*index), "name"}),
               std::string(kSchedulingGate));
  }
  json released = pod;
  assignBackend(released, assignment);
  patch.append(JsonPatch::between(pod, released));
  return patch;
}

bool isReleaseConflict(const Error& error) {
  return error.isConflict() ||
         (error.httpStatus == 422 && error.message.find("test") != std::string::npos);
}

LoneRelease chooseAlone(const ObjectSnapshot& pod, const std::vector<Backend>& backends,
                        BackendAssigner& assigner) {
  if (!gatedByWebhook(*pod)) {
    return {refused(pod), std::nullopt};
  }
  std::optional<BackendRequirements> asked;
  AssignResult assigned = assignWaiting(assigner, backends, *pod, &asked);
  if (!assigned) {
    const bool noRoom = assigned.error().kind == NotAssigned::Kind::Waits;
    PodOutcome outcome = waits(pod, assigned.error().reason, noRoom);
    outcome.asked = std::move(asked);
    return {std::move(outcome), std::nullopt};
  }
  PodOutcome outcome;
  outcome.pod = pod;
  outcome.kind = PodOutcome::Kind::Failed;  // until its write succeeds
  outcome.choice = assigned->choice;
  outcome.asked = std::move(asked);
  return {std::move(outcome), releasePatch(*pod, assigned->assignment)};
}

std::vector<PodOutcome> releaseWaitingPods(const std::vector<ObjectSnapshot>& waiting,
                                           const std::vector<Backend>& backends,
                                           BackendChooser& chooser,
                                           const std::vector<std::string>& plugins,
                                           const ReleaseWriter& write, std::stop_token stop,
                                           const GangLookup& gangOf, size_t parallelWrites) {
  return ReleasePass(backends, chooser, plugins, write, parallelWrites).run(waiting, stop, gangOf);
}

}  // namespace gvirtus::webhook
