#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>

#include "common/kube_client.h"
#include "common/metrics.h"
#include "common/resource_cache.h"
#include "common/work_queue.h"
#include "labeler/node_labels.h"
#include "labeler/options.h"

namespace gvirtus::labeler {

// Keeps the GVirtuS labels of one node (or of every node, with --all-nodes) as the
// policy wants them: the controller shape of sample-controller, on the shared cache.
// Node events and GPU probe changes enqueue the node; sync(name) compares and writes at
// most one PATCH; failures come back with backoff.
class NodeLabeler {
 public:
  NodeLabeler(KubeClient& client, const Options& options, MetricsRegistry& metrics);
  ~NodeLabeler();

  // Runs until `stop`: starts the cache, the GPU probe timer and the workers.
  void run(std::stop_token stop);
  // --once: reads the node and reconciles it, retrying conflicts. An error names the reason.
  Result<void> reconcileOnce();
  // True once the node cache has synced and the node was found and reconciled once.
  bool ready() const { return ready_.load(); }

  // Reconciles one node object; returns whether it patched.
  Result<bool> reconcile(const nlohmann::json& node);

 private:
  LabelPolicy policyFor(const std::string& nodeName) const;
  Result<void> sync(const std::string& name);
  void worker(std::stop_token stop);
  void probeGpu();

  KubeClient& client_;
  const Options options_;
  std::unique_ptr<ResourceCache> nodes_;
  WorkQueue queue_;
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
