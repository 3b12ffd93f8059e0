#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>

#include "common/cache/object_cache.h"
#include "common/controller/controller.h"
#include "common/kube/client.h"
#include "common/telemetry/metrics.h"
#include "common/time/clock.h"
#include "labeler/node_labels.h"
#include "labeler/options.h"

namespace gvirtus::labeler {

// What the labeler reads and writes of the API server outside its cache. A unit test
// passes functions that answer from memory.
struct NodeApi {
  std::function<Result<nlohmann::json>(const std::string& name)> get;
  // Applies a JSON merge patch; returns the node as patched.
  std::function<Result<nlohmann::json>(const std::string& name, const std::string& mergePatch)>
      patch;
};
NodeApi nodeApi(KubeClient& client);

// The field selector of the labeler's node cache: its own node, or every node with
// --all-nodes.
std::string nodeFieldSelector(const Options& options);

// Keeps the GVirtuS labels of one node (or of every node, with --all-nodes) as the
// policy wants them, on the shared controller loop (common/controller/controller.h): node events
// and GPU probe changes enqueue the node; sync(name) compares and writes at most one PATCH;
// failures come back with backoff.
class NodeLabeler {
 public:
  // `clock` paces the GPU probe.
  NodeLabeler(NodeApi api, const Options& options, MetricsRegistry& metrics,
              Clock* clock = &systemClock());

  // Runs until `stop` on `nodes`, a cache of the nodes to label (nodeFieldSelector()):
  // registers its handlers, starts it, runs the workers and the GPU probe.
  void run(std::stop_token stop, ObjectCache& nodes);
  // --once: reads the node and reconciles it, retrying conflicts. An error names the reason.
  Result<void> reconcileOnce();
  // True once the node cache has synced and the node was found and reconciled once.
  bool ready() const { return ready_.load(); }

  // Reconciles one node object; returns whether it patched.
  Result<bool> reconcile(const nlohmann::json& node);
  // Reconciles the node `name` as `nodes` holds it; a node not (yet) there is no error.
  Result<void> sync(const std::string& name, const ObjectCache& nodes);

 private:
  LabelPolicy policyFor(const std::string& nodeName) const;
  void probeGpu(Controller& controller);

  const NodeApi api_;
  const Options options_;
  Clock* clock_;
  std::atomic<bool> gpuPresent_ = false;
  std::atomic<bool> ready_ = false;

  // What we last wrote, keyed by node: when the cache still holds the version we patched
  // from, the patch result stands in for it, so a stale cache never causes a second write.
  struct Written {
    std::string fromResourceVersion;
    nlohmann::json result;
  };
  std::mutex writtenMutex_;
  std::map<std::string, Written> written_;

  Counter& reconciles_;
  Counter& patches_;
  Counter& conflicts_;
  Counter& errors_;
};

}  // namespace gvirtus::labeler
