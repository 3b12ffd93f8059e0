#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/cache/object_cache.h"
#include "common/cache/resource_cache.h"
#include "common/kube/client.h"
#include "webhook/pods/gvirtus_pod_store.h"
#include "webhook/release/pass.h"

// Release units, the keys of the waiting-pod controller's queue: a waiting pod that goes
// alone ("namespace/name", its cacheKey()), or the waiting members of a KAI gang
// ("gang:namespace/PodGroup"), read from the caches of one term of the controller.
namespace gvirtus::webhook {

// The waiting pods among `pods`, oldest first: by creationTimestamp, then namespace/name.
std::vector<ObjectSnapshot> waitingPods(const std::vector<ObjectSnapshot>& pods);

// The key of the release unit of the members of KAI PodGroup `group` in `ns`.
std::string gangUnitKey(const std::string& ns, const std::string& group);
bool isGangUnitKey(const std::string& key);

// What one term of the controller watches: made and started by its run(), stopped before
// it returns, so that a replica that does not lead watches none of it.
struct TermCaches {
  // `ownNamespace`: the webhook's, whose pods are never gated. `store`: every GVirtuS pod,
  // kept by its owner; null: the term keeps a store of its own.
  TermCaches(KubeClient& client, const std::string& ownNamespace, GvirtusPodStore* store);
  void start();
  // Before the term's controller goes: their handlers enqueue on it.
  void stop();
  bool synced() const;

  // Unscheduled GVirtuS pods outside the webhook's namespace (a released pod leaves once
  // the scheduler binds it).
  ResourceCache pods;
  // KAI's PodGroups, their minMember only; empty without KAI's CRD.
  ResourceCache podGroups;
  std::unique_ptr<ResourceCache> ownGvirtusCache;
  std::unique_ptr<GvirtusPodStore> ownGvirtusPods;
  GvirtusPodStore* gvirtusPods;
};

// The units the caches make.
class ReleaseUnits {
 public:
  explicit ReleaseUnits(const TermCaches& caches) : caches_(caches) {}

  // The unit a waiting pod belongs to now: its gang's or its own.
  std::string unitOf(const nlohmann::json& pod) const;
  // The gang of a pod, with its members that no longer wait and still run counted; nullopt
  // for a pod that goes alone (no PodGroup annotation, no KAI, minMember 1).
  std::optional<Gang> gangOf(const nlohmann::json& pod) const;
  // The cached pods of a unit, waiting or not, oldest first.
  std::vector<ObjectSnapshot> podsOf(const std::string& key) const;

 private:
  // gangOf() without the members counted.
  std::optional<Gang> podGroupOf(const nlohmann::json& pod) const;

  const TermCaches& caches_;
};

}  // namespace gvirtus::webhook
