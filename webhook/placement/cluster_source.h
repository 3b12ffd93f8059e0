#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "common/cache/resource_cache.h"
#include "common/kube/client.h"
#include "common/time/duration.h"
#include "webhook/placement/source.h"
#include "webhook/pods/gvirtus_pod_store.h"

namespace gvirtus::webhook {

// The backend a backend pod offers, or nullopt when it cannot take frontends: not Ready,
// no IPv4 pod IP, being deleted, a mirror pod, or its `node` (the pod's Node) not known or not
// opted in (gvirtus.io/backend.allowed=true). The node gives the zone and the drain mark; the
// gvirtus.io/load annotation gives the load (absent, unreadable or claiming more GPUs than
// the pod holds, or than its node has when the pod asks for none: unknown).
std::optional<Backend> backendFromPod(const nlohmann::json& pod, const nlohmann::json* node,
                                      int port);

// What the node cache keeps of a Node: its name, resourceVersion, zone and
// gvirtus.io/backend.allowed labels, gvirtus.io/backend-draining annotation and
// nvidia.com/gpu capacity, all that backendFromPod() reads. A real Node is
// kilobytes (its images, conditions, managedFields) and there is one per machine.
nlohmann::json nodeFields(nlohmann::json node);

// The backend a GVirtuS pod was given ("IP:PORT", when it was created, by which webhook
// instance, and its namespace/name): it has gvirtus.io/backend and a creation time and has
// not finished. nullopt otherwise.
std::optional<std::pair<std::string, AssignedPod>> assignedPod(const nlohmann::json& pod);

// Backend pods in one namespace matching a label selector, from a watch cache of those
// pods and one of the nodes (for their zones); and, from a third cache, the GVirtuS pods
// (label gvirtus.io/enabled=true, every namespace) given them: the GPU shares they hold,
// and those created within `assignmentWindow` (what other webhook replicas assigned, and
// which of this one's assignments at admission were for pods that exist).
class ClusterBackendSource : public BackendSource {
 public:
  ClusterBackendSource(KubeClient& client, std::string ns, std::string labelSelector, int port,
                       Duration assignmentWindow = std::chrono::minutes(1));
  ~ClusterBackendSource() override;

  void setOnChange(std::function<void()> onChange) override;
  void start() override;
  void stop() override;
  bool ready() const override;
  // Built from the caches once per change of a backend pod, of a node's zone or draining
  // mark or of a GPU share, not once per admission. A new assignment (another replica's
  // pod, or one of this one's that now exists) reaches the list within
  // kAssignmentRefresh: during a burst every admission creates one, and a list rebuilt for
  // each would cost every admission all the assignments of the window.
  BackendSnapshot backends() const override;
  static constexpr auto kAssignmentRefresh = std::chrono::milliseconds(100);

  // The caches the peer publisher reads (webhook/peers/publisher.h), which adds its handlers
  // before start(): the backend pods, and the GVirtuS pods as frontendFields() keeps them.
  ObjectCache& backendPods() { return *pods_; }
  GvirtusPodStore& frontendPods() { return *gvirtusPods_; }
  // Objects each cache holds now (the webhook's memory follows them; its metrics show them).
  struct CacheSizes {
    size_t nodes = 0;
    size_t backendPods = 0;
    size_t gvirtusPods = 0;
  };
  CacheSizes cacheSizes() const { return {nodes_->size(), pods_->size(), frontends_->size()}; }
  int port() const { return port_; }

 private:
  std::vector<Backend> buildBackends() const;
  // The Node a pod is bound to, as the node cache keeps it; null when not bound or not known.
  ObjectSnapshot nodeOf(const nlohmann::json& pod) const;
  void invalidate();
  // Records the share and the assignment of one GVirtuS pod (nullopt: it holds none, has
  // none); true when that changed what its backend holds.
  bool updateFrontend(const std::string& pod, std::optional<std::pair<std::string, GpuShare>> share,
                      std::optional<std::pair<std::string, AssignedPod>> assigned);

  const int port_;
  const Duration assignmentWindow_;
  std::function<void()> onChange_;
  std::unique_ptr<ResourceCache> nodes_;
  std::unique_ptr<ResourceCache> pods_;
  std::unique_ptr<ResourceCache> frontends_;
  std::unique_ptr<GvirtusPodStore> gvirtusPods_;  // fed by frontends_

  mutable std::mutex mutex_;
  // Raised by every cache change that can alter the list; a list built while it moved is
  // not kept, so a build that read the caches before a change never hides it.
  uint64_t generation_ = 0;
  mutable BackendSnapshot built_;
  mutable std::chrono::steady_clock::time_point builtAt_;
  // Raised by every change of assigned_, and its value that built_ includes.
  uint64_t assignmentChanges_ = 0;
  mutable uint64_t builtAssignmentChanges_ = 0;
  mutable bool building_ = false;  // a caller builds the next list
  // By pod ("namespace/name"): the backend it was given and the share it holds there.
  std::map<std::string, std::pair<std::string, GpuShare>> shares_;
  // By pod: the backend it was given, when and by whom; only pods created within the
  // assignment window (a build lets go of those that left it). Hashed: a build looks up
  // each of them, and their names share long prefixes.
  mutable std::unordered_map<std::string, std::pair<std::string, AssignedPod>> assigned_;
  // By pod: the backend endpoint of every GVirtuS pod given one that has not finished, with
  // the backend pod it names (wiredKey()), and how many each has (Backend::wired). An earlier
  // backend pod's pods do not count against a new one that reuses its address.
  std::unordered_map<std::string, std::string> wiredTo_;
  std::unordered_map<std::string, int64_t> wiredCount_;
  // The pods of assigned_, by creation time.
  mutable std::set<std::pair<std::chrono::system_clock::time_point, std::string>> recentAssigned_;

  // What the last build read of each backend pod ("namespace/name"), with the versions of
  // the pod and of its node it read it at (buildBackends()).
  struct ReadBackend {
    std::string podVersion;
    std::string nodeVersion;
    std::optional<Backend> backend;
  };
  mutable std::mutex readMutex_;  // builds may overlap; the memo is theirs, not mutex_'s
  mutable std::unordered_map<std::string, ReadBackend> read_;
};

}  // namespace gvirtus::webhook
