#include "labeler/node_labeler.h"

#include <thread>
#include <vector>

#include "common/log.h"
#include "labeler/gpu_probe.h"

namespace gvirtus::labeler {

NodeLabeler::NodeLabeler(KubeClient& client, const Options& options, MetricsRegistry& metrics)
    : client_(client),
      options_(options),
      reconciles_(metrics.counter("gvirtus_labeler_reconciles_total", "Node reconciles run.")),
      patches_(metrics.counter("gvirtus_labeler_patches_total", "Node label patches written.")),
      conflicts_(metrics.counter("gvirtus_labeler_conflicts_total",
                                 "Patches refused because the node changed meanwhile.")),
      errors_(metrics.counter("gvirtus_labeler_errors_total", "Failed reconciles.")) {
  gpuPresent_ = gpuPresent(options_.gpuProbePaths);
}

NodeLabeler::~NodeLabeler() {
  queue_.shutDown();
}

LabelPolicy NodeLabeler::policyFor(const std::string& nodeName) const {
  LabelPolicy policy{options_.defaultFrontend, options_.defaultBackend, std::nullopt};
  // One process sees only its own node's devices.
  if (!options_.allNodes || nodeName == options_.nodeName) {
    policy.gpuPresent = gpuPresent_.load();
  }
  return policy;
}

Result<bool> NodeLabeler::reconcile(const nlohmann::json& node) {
  reconciles_.inc();
  const std::string name = node.value("/metadata/name"_json_pointer, std::string());
  const std::string rv = node.value("/metadata/resourceVersion"_json_pointer, std::string());
  const nlohmann::json* current = &node;
  {
    std::lock_guard lock(writtenMutex_);
    if (auto it = written_.find(name); it != written_.end()) {
      if (it->second.fromResourceVersion == rv) {
        current = &it->second.result;  // our write is newer than what the cache holds
      } else {
        written_.erase(it);
      }
    }
  }
  const auto patch = labelPatch(*current, policyFor(name));
  if (!patch) {
    return false;
  }
  auto result = client_.patch(resources::kNodes, "", name, PatchType::Merge, patch->dump());
  if (!result) {
    if (result.error().isConflict()) {
      conflicts_.inc();
    }
    return fail(result.error().context("patch node " + name));
  }
  patches_.inc();
  log::info("labeled node", {{"node", name}, {"labels", (*patch)["metadata"]["labels"]}});
  std::lock_guard lock(writtenMutex_);
  written_[name] = Written{rv, std::move(*result)};
  return true;
}

Result<void> NodeLabeler::sync(const std::string& name) {
  auto node = nodes_->get("", name);
  if (!node) {
    if (name == options_.nodeName) {
      log::warn("node not found; waiting for it to appear", {{"node", name}});
    }
    return {};  // a new node arrives as an add event
  }
  auto patched = reconcile(*node);
  if (!patched) {
    return fail(patched.error());
  }
  return {};
}

void NodeLabeler::worker(std::stop_token stop) {
  while (auto key = queue_.get(stop)) {
    if (auto ok = sync(*key); ok) {
      queue_.forget(*key);
      if (!options_.allNodes && nodes_->get("", *key)) {
        ready_ = true;
      }
    } else {
      errors_.inc();
      // A conflict only means the node moved on: the watch brings the new version.
      if (!ok.error().isConflict()) {
        log::error("reconcile failed; retrying with backoff",
                   {{"node", *key}, {"error", ok.error().message}});
      }
      queue_.addRateLimited(*key);
    }
    queue_.done(*key);
  }
}

void NodeLabeler::probeGpu() {
  const bool present = gpuPresent(options_.gpuProbePaths);
  if (present != gpuPresent_.exchange(present)) {
    log::info("GPU presence changed", {{"node", options_.nodeName}, {"present", present}});
    queue_.add(options_.nodeName);
  }
}

void NodeLabeler::run(std::stop_token stop) {
  const std::string fieldSelector =
      options_.allNodes ? std::string() : "metadata.name=" + options_.nodeName;
  nodes_ = std::make_unique<ResourceCache>(client_, resources::kNodes, "", "", fieldSelector);
  auto enqueue = [this](const nlohmann::json& node) { queue_.add(cacheKey(node)); };
  nodes_->addHandlers(
      {.onAdd = enqueue,
       .onUpdate = [enqueue](const nlohmann::json&, const nlohmann::json& now) { enqueue(now); },
       .onDelete = {}});
  nodes_->start();
  std::stop_callback stopQueue(stop, [this] { queue_.shutDown(); });

  std::vector<std::jthread> workers;
  const int64_t count = options_.allNodes ? options_.workers : 1;
  for (int64_t i = 0; i < count; ++i) {
    workers.emplace_back([this, stop] { worker(stop); });
  }
  while (!stop.stop_requested() && !nodes_->waitForSync(std::chrono::milliseconds(200))) {
  }
  if (nodes_->hasSynced()) {
    if (options_.allNodes) {
      ready_ = true;
    } else if (!nodes_->get("", options_.nodeName)) {
      log::warn("node not found; waiting for it to appear", {{"node", options_.nodeName}});
    }
  }
  std::mutex sleepMutex;
  std::condition_variable_any sleeper;
  std::unique_lock lock(sleepMutex);
  while (!stop.stop_requested()) {
    sleeper.wait_for(lock, stop, options_.gpuProbeInterval, [] { return false; });
    if (!stop.stop_requested() && !options_.nodeName.empty()) {
      probeGpu();
    }
  }
  workers.clear();
  nodes_->stop();
}

Result<void> NodeLabeler::reconcileOnce() {
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    auto node = client_.get(resources::kNodes, "", options_.nodeName);
    if (!node) {
      return fail(node.error().context("get node " + options_.nodeName));
    }
    auto patched = reconcile(*node);
    if (patched) {
      return {};
    }
    if (!patched.error().isConflict() || attempt == kAttempts) {
      return fail(patched.error());
    }
  }
}

}  // namespace gvirtus::labeler
