#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stop_token>
#include <string>

#include "common/base/error.h"
#include "common/cache/object_cache.h"
#include "common/controller/event_recorder.h"
#include "common/controller/leader_controller.h"
#include "common/kube/client.h"
#include "common/time/duration.h"
#include "webhook/dra/binding.h"
#include "webhook/placement/chooser.h"
#include "webhook/placement/source.h"

// The claim binder (--dra with --dra-binding-timeout, docs/dra.md "Binding waits for room"):
// kube-scheduler binds a pod whose claim was given a device of gpu.gvirtus.io only once the
// binder has said, in the claim's status.devices, that the device's backend has room for
// one more session; or gives the device up when the binder says it cannot have one.
namespace gvirtus::webhook {

// The one write of the binder: a server-side apply of status.devices entries of its own
// (ResourceClaim's status subresource).
using BindingStatusApply = std::function<Result<void>(const nlohmann::json& status)>;
BindingStatusApply bindingStatusApply(KubeClient& client);

// Whether the API server keeps the binding conditions of a slice's device (Kubernetes 1.36
// and later; DRADeviceBindingConditions): asked once, with a dry-run create of a slice. When
// not, `whyNot` says why, for the start-up line.
bool bindingConditionsServed(KubeClient& client, std::string& whyNot);

struct ClaimBinderOptions {
  // A backend still full this long after allocation is refused: kube-scheduler then
  // allocates the claim again, maybe on the same device (--dra-binding-timeout).
  Duration timeout = std::chrono::seconds(60);
  // Where each answer, and a wait, is told on the claim (WaitingForBackend, BackendReady,
  // BackendRefused); none in unit tests.
  EventRecorder* events = nullptr;
  Duration backoffInitial = std::chrono::milliseconds(500);
  Duration backoffMax = std::chrono::seconds(30);
};

// On the shared controller loop, one key per claim ("namespace/name"): a claim that changed
// queues itself, a change of the backends queues the claims that wait for room. sync(key) answers
// every device of the claim that waits (bindingWait()) in one apply: ready when the chooser
// finds room on each device's backend (each counted as one of its sessions for the chooser's
// assignment window, as a release on the label path is), refused when one's backend is gone,
// draining, or full past the timeout; nothing while one waits for room.
class ClaimBinder {
 public:
  // Adds its handlers to `claims` (this driver's claims, compactClaim() enough), which must
  // not have started. Every argument must outlive it.
  ClaimBinder(const BackendSource& backends, ObjectCache& claims, BackendChooser& chooser,
              BindingStatusApply apply, ClaimBinderOptions options = {});

  // The backends or their loads changed: every claim that waits for room is looked at again
  // (without reading the other claims).
  void backendsChanged();
  // The leader's work: runs until `stop`. May run again after it returned.
  void run(std::stop_token stop);
  // Answers what claim `key` waits for; its result says when to look again.
  Result<SyncResult> sync(const std::string& key);

 private:
  // Every claim of the cache that waits for an answer (at start and at each resync).
  void enqueueWaiting();
  // One allocation of a claim: its UID and allocationTimestamp.
  struct Allocation {
    std::string uid;
    std::optional<std::chrono::system_clock::time_point> at;
    bool operator==(const Allocation&) const = default;
  };
  void setWaiting(const std::string& key, bool waits);
  // The decision as an Event on `claim`.
  void tell(const nlohmann::json& claim, const BindingDecision& decision);

  const BackendSource& backends_;
  ObjectCache& claims_;
  BackendChooser& chooser_;
  const BindingStatusApply apply_;
  const ClaimBinderOptions options_;
  LeaderController leader_;
  // By claim key: the allocation answered last, until the cache shows the answer (one worker
  // reads and writes it: no lock).
  std::map<std::string, Allocation> answered_;
  // The claims being answered or waiting for room: a key joins before its sync asks the
  // chooser, so a change of the backends during that sync queues it again, and leaves once
  // answered (or gone).
  std::mutex waitingLock_;
  std::set<std::string> waiting_;
};

}  // namespace gvirtus::webhook
