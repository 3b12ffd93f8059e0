#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/base/json_patch.h"
#include "common/cache/object_cache.h"
#include "webhook/placement/assigner.h"
#include "webhook/placement/backend.h"
#include "webhook/placement/chooser.h"
#include "webhook/pods/pod_wiring.h"

// The release of waiting pods for the waiting-pod controller (webhook/release/controller.h):
// which get a backend, in what order, and the patches that release them; gangs (KAI
// PodGroups) all or none.
namespace gvirtus::webhook {

// When the pod was created; the latest time there is when it does not say (it goes last).
std::chrono::system_clock::time_point createdAt(const nlohmann::json& pod);
// The pod's UID; its namespace/name when it has none.
std::string podUid(const nlohmann::json& pod);

// The patch that releases a waiting pod: what assignBackend() changes on a copy of it
// (backend annotations; gate and waiting status removed), behind `test` operations on the pod's
// resourceVersion and on the gate at its index, so that on a pod changed since it was read
// (released by another replica, a gate list reordered) the API server refuses the whole patch
// instead of applying it.
JsonPatch releasePatch(const nlohmann::json& pod, const Assignment& assignment);

// True for a refused release patch that means the pod changed meanwhile: 409, or 422 from a
// failed `test` operation.
bool isReleaseConflict(const Error& error);

// What one pass did with one waiting pod.
struct PodOutcome {
  // Refused: gated, but not by the webhook (gatedByWebhook() is false); never released.
  enum class Kind { Released, Waiting, Failed, Refused };
  Kind kind = Kind::Waiting;
  ObjectSnapshot pod;                        // as the pass read it (never null)
  std::optional<Choice> choice;              // Released: the backend given
  std::string reason;                        // Waiting, Refused: why it is not released
  bool forCapacity = false;                  // Waiting: because no backend has room for it
  std::optional<Error> error;                // Failed: the patch's error
  std::chrono::system_clock::time_point at;  // Released: when the patch succeeded
  // A lone pod's: what it asks, as its choice parsed it (absent where it did not parse),
  // so that parking it, its group's next and its demand parse it no more.
  std::optional<BackendRequirements> asked;
};

// Writes one release patch to one pod.
using ReleaseWriter =
    std::function<Result<void>(const nlohmann::json& pod, const JsonPatch& patch)>;

// A gang: the waiting pods of one KAI PodGroup whose minMember is more than 1. KAI binds
// such a group only whole, so its pods are released together or not at all: a released
// member would hold a backend session for a pod that cannot run yet.
struct Gang {
  std::string name;   // namespace/PodGroup
  int minMember = 1;  // from the PodGroup
  int others = 0;     // members that no longer wait (released earlier)
  // The pod names a PodGroup the cache does not show yet (KAI's podgrouper writes the
  // annotation once the PodGroup exists, so it is on its way): its members wait for it
  // rather than go alone, which could release part of a gang.
  bool unseen = false;
};
// The gang of a waiting pod; nullopt for a pod that goes alone (no PodGroup annotation,
// no such PodGroup, minMember 1).
using GangLookup = std::function<std::optional<Gang>(const nlohmann::json& pod)>;

// The release of a waiting pod that goes alone, decided and not written yet: refused (the
// webhook did not wire it), waiting (with the reason; forCapacity when no backend has room),
// or a backend chosen and recorded by the chooser (`outcome` Failed until the `patch` is
// written; the caller gives the choice back when the write fails).
struct LoneRelease {
  PodOutcome outcome;
  std::optional<JsonPatch> patch;
};
LoneRelease chooseAlone(const ObjectSnapshot& pod, const std::vector<Backend>& backends,
                        BackendAssigner& assigner);

// One pass over waiting pods (the controller's: the waiting members of one gang), in the
// given order (oldest first): the chooser picks a
// backend for each and records it (confirmed: the pod exists), so that the next pod sees
// it taken (never more pods than a backend's capacity), and `write` releases the pod; a
// failed write gives the backend back. A pod the webhook did not wire and gate at
// admission (gatedByWebhook()) is refused: it is given no backend and keeps its gate. A
// pod no backend can take waits and the next one is tried. Stops early, between pods, when
// `stop` is requested.
//
// Gangs (`gangOf`): the waiting members of a gang go at the place of their oldest member,
// all of them or none: when fewer than minMember exist, or not all of them can get a
// backend, they all wait with that reason and give back what was chosen for them. Their
// first member is written before the others, which are not written when it is refused. A
// gang that a pass (or a leader that went away) left partly released, some members
// released and some still gated, is completed first: it goes before every other pod, and
// each of its members is released as soon as a backend can take it (pass.cpp says
// why).
//
// The writes go `parallelWrites` at a time (each waits for the API server, not for the
// others): the choices for a batch of 8 × `parallelWrites` pods are made, and their writes
// drawn by that many writers. The backends of failed ones are given back before any pod
// that found no room is judged: such a pod waits for the pending writes and is asked
// again. With 1, each pod is written before the next is chosen. `write` must then be safe
// to call from several threads.
//
// The pods are the cache's own snapshots, shared and never copied: at 10,000 waiting pods a
// pass that copied each (and again into its outcome) held gigabytes for its duration.
std::vector<PodOutcome> releaseWaitingPods(
    const std::vector<ObjectSnapshot>& waiting, const std::vector<Backend>& backends,
    BackendChooser& chooser, const std::vector<std::string>& plugins, const ReleaseWriter& write,
    std::stop_token stop = {}, const GangLookup& gangOf = {}, size_t parallelWrites = 1);

}  // namespace gvirtus::webhook
