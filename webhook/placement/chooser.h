#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <expected>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/contract/backend_requirements.h"
#include "common/time/duration.h"
#include "webhook/placement/backend.h"

namespace gvirtus::webhook {

struct Choice {
  Backend backend;
  Policy policy = Policy::LeastConnections;
  // same-zone: the zone the pod should prefer (a preferred node affinity); empty otherwise.
  std::string preferredZone;
  // The GPU of the backend the pod's GPU memory counts against, and how much (MiB); none
  // when the pod asks for no GPU memory.
  std::optional<int64_t> gpuIndex;
  int64_t memoryMiB = 0;
  // Set when choose() recorded the assignment: what cancelAssignment() takes back.
  uint64_t reservation = 0;
};

// Why no backend can take a pod, in words for an admission warning and an Event.
struct NoBackend {
  std::string reason;
};

using ChooseResult = std::expected<Choice, NoBackend>;

struct ChooserOptions {
  Policy policy = Policy::LeastConnections;
  // Own assignments count as connections (and against maxSessions) for this long, so that
  // a burst of pods does not all land on one backend before its load report catches up.
  Duration assignmentWindow = std::chrono::minutes(1);
  // An assignment made at admission counts only this long unless its pod is seen: among
  // the backend's pods (Backend::assigned) as one this instance assigned, by name, or when
  // the review had no name yet (generateName), created since. Whoever reaches the webhook's
  // port can post reviews for pods that are never created; each would otherwise hold a
  // session for the whole window. Assignments of pods that exist (confirmAssignment(): the
  // waiting-pod controller's releases) count for the window, or until their pod, once seen,
  // is gone (deleted, finished). Zero: every assignment counts for the window (static
  // backends, whose pods no one watches).
  Duration unconfirmedLifetime = std::chrono::seconds(5);
  // A load report older than this is unknown: such backends rank after fresh ones.
  Duration staleAfter = std::chrono::minutes(1);
  // A load report older than this means the backend is gone.
  Duration goneAfter = std::chrono::minutes(5);
  // This webhook instance, as gvirtus.io/assigned-by names it on the pods it assigns; by
  // default the host name and a random suffix. Pods another instance assigned within the
  // window count as connections too (Backend::assigned).
  std::string instance;
  // The clock and the random source, for deterministic tests; defaults: system clock,
  // a seeded mt19937.
  std::function<std::chrono::system_clock::time_point()> now;
  std::function<double()> random;  // [0, 1)
};

// How least-connections breaks ties between backends with as many connections.
enum class TieOrder {
  // An order of the backends that is this instance's own (a hash of instance and endpoint):
  // replicas that do not know of each other mostly choose apart.
  Own,
  // By endpoint, up or down: under --leader-elect the leader goes up and the other replica
  // down, so that two replicas choosing at once, before each sees the other's choice, never
  // take the same one of several equal backends.
  Ascending,
  Descending,
};

// Picks one backend for one pod. Thread-safe: admissions run on several threads.
//
// A backend is left out when its load report is older than goneAfter, when its
// connections plus recent assignments reach maxSessions, or when the pod asks for GPU
// memory or a GPU count its load report does not show (an unknown load shows nothing).
// GPU memory (gvirtus.io/gpu-memory, KAI gpu-memory, KAI gpu-fraction of that GPU's total)
// must be left on one GPU: its total less the larger of its reported use and the shares its
// pods hold, less recent assignments not yet among those shares; the pod takes it from the
// GPU with the most left.
// Of the rest, backends with a fresh load report come first; the policy picks among them:
// least-connections (connections plus recent assignments, this instance's and those other
// replicas made; among as many, the backend given fewer of this instance's own, then by
// TieOrder),
// round-robin (in endpoint order), random, same-zone (least-connections within the pod's
// zone when it names one and a backend is there, and the chosen backend's zone becomes the
// pod's preferred zone).
class BackendChooser {
 public:
  explicit BackendChooser(ChooserOptions options = {});

  // `record`: count the assignment and advance round-robin (false for dry runs, which
  // must have no side effect). The assignment counts for unconfirmedLifetime until its pod
  // is seen among `backends` (or confirmAssignment()), then for the window. First confirms
  // earlier assignments whose pods `backends` show.
  ChooseResult choose(const std::vector<Backend>& backends, const BackendRequirements& pod,
                      bool record);

  // Counts an assignment made elsewhere, for the window.
  void recordAssignment(const std::string& endpoint);
  // Takes back an assignment choose() recorded (the pod was not given the backend after
  // all: its patch failed). Does nothing for an unrecorded or expired one.
  void cancelAssignment(const Choice& choice);
  // Counts an assignment choose() recorded for the whole window: its pod exists (the
  // waiting-pod controller read it from the cluster). Does nothing for an unrecorded or
  // expired one.
  void confirmAssignment(const Choice& choice);
  // Assignments to `endpoint` still counted: confirmed within the window, unconfirmed
  // within unconfirmedLifetime.
  int64_t recentAssignments(const std::string& endpoint);
  // Of those, the ones not confirmed yet.
  int64_t unconfirmedAssignments(const std::string& endpoint);
  Policy defaultPolicy() const { return options_.policy; }
  // Thread-safe; TieOrder::Own until set.
  void setTieOrder(TieOrder order) { tieOrder_.store(order, std::memory_order_relaxed); }
  // What gvirtus.io/assigned-by says on the pods this chooser assigns.
  const std::string& instance() const { return options_.instance; }

 private:
  using TimePoint = std::chrono::system_clock::time_point;
  // One recent assignment to a backend, with the GPU memory it took.
  struct Reservation {
    TimePoint at;
    uint64_t id = 0;
    std::optional<int64_t> gpuIndex;
    int64_t memoryMiB = 0;
    std::string pod;  // "namespace/name"; empty when the pod had no name yet
    // Its pod was seen (or exists): it counts for the whole window.
    bool confirmed = false;
    std::string seenAs;  // the pod seen for it ("namespace/name"), never matched again
    // When seenAs was among the backend's pods (Backend::assigned), its creation time:
    // when it is there no more, the pod was deleted or finished, unless it only aged out of
    // that list (which keeps the pods created within the window).
    std::optional<TimePoint> listedCreated = std::nullopt;
  };
  void pruneLocked(TimePoint now);
  // The reservation choose() recorded for `choice`; null when unrecorded or expired.
  Reservation* findLocked(const Choice& choice);
  // Confirms the unconfirmed assignments to `backend` whose pods it shows (Backend::assigned).
  void confirmLocked(const Backend& backend);
  // Forgets the assignments to `backend` whose pods were among its pods and are gone.
  void forgetGoneLocked(const Backend& backend, TimePoint now);
  // `count` matched reservations of `endpoint` went away.
  void unmatchLocked(const std::string& endpoint, size_t count);
  int64_t recentLocked(const std::string& endpoint) const;
  // Pods other webhook instances gave `backend` within the window.
  int64_t assignedElsewhere(const Backend& backend, TimePoint now) const;
  // MiB taken on one GPU of `backend`: the larger of what it reports used and what the
  // shares of its pods hold, plus recent assignments of pods not among those shares yet.
  int64_t takenLocked(const Backend& backend, const GpuLoad& gpu) const;

  // choose() in three steps. Candidate: one backend that can take the pod, with what ranks
  // it; Refusals: how many backends were set aside, by reason (both in chooser.cpp).
  struct Candidate;
  struct Refusals;
  // 1. Filter: the backends that can take `pod`; the others counted in `refusals`.
  std::vector<Candidate> filterLocked(const std::vector<Backend>& backends,
                                      const BackendRequirements& pod, TimePoint now,
                                      TieOrder tieOrder, Refusals& refusals) const;
  // Why none of `total` backends can take `pod`, in one line.
  std::string refusalReason(size_t total, const Refusals& refusals,
                            const BackendRequirements& pod) const;
  // 2. Score: one of `candidates` (not empty) by `policy`; advances the round-robin when
  // `record`.
  Candidate pickLocked(std::vector<Candidate> candidates, Policy policy,
                       const BackendRequirements& pod, TieOrder tieOrder, bool record);
  // 3. Reserve: the choice and, when `record`, the assignment counted for the window.
  Choice reserveLocked(const Candidate& chosen, Policy policy, const BackendRequirements& pod,
                       TimePoint now, bool record);

  ChooserOptions options_;
  std::mutex mutex_;
  std::map<std::string, std::deque<Reservation>> assignments_;
  // Per backend: how many of its reservations were matched to a pod (seenAs set; only
  // those can be forgotten as gone). Without any, forgetGoneLocked() returns at once
  // instead of walking every reservation of the window on each review (static backends,
  // or a flood of reviews for pods never created, leave them all unmatched).
  std::map<std::string, size_t> matched_;
  std::atomic<TieOrder> tieOrder_ = TieOrder::Own;
  uint64_t nextRoundRobin_ = 0;
  uint64_t nextReservation_ = 1;
};

}  // namespace gvirtus::webhook
