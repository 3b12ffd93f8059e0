#include "labeler/node_labeler.h"

#include <thread>

#include "common/telemetry/log.h"
#include "labeler/gpu_probe.h"

namespace gvirtus::labeler {

NodeApi nodeApi(KubeClient& client) {
  return {
      .get = [&client](const std::string& name) { return client.get(resources::kNodes, "", name); },
      .patch =
          [&client](const std::string& name, const std::string& mergePatch) {
            return client.patch(resources::kNodes, "", name, PatchType::Merge, mergePatch);
          }};
}

std::string nodeFieldSelector(const Options& options) {
  return options.allNodes ? std::string() : "metadata.name=" + options.nodeName;
}

NodeLabeler::NodeLabeler(NodeApi api, const Options& options, MetricsRegistry& metrics,
                         Clock* clock)
    : api_(std::move(api)),
      options_(options),
      clock_(clock),
      reconciles_(metrics.counter("gvirtus_labeler_reconciles_total", "Node reconciles run.")),
      patches_(metrics.counter("gvirtus_labeler_patches_total", "Node label patches written.")),
      conflicts_(metrics.counter("gvirtus_labeler_conflicts_total",
                                 "Patches refused because the node changed meanwhile.")),
      errors_(metrics.counter("gvirtus_labeler_errors_total", "Failed reconciles.")) {
  gpuPresent_ = gpuPresent(options_.gpuProbePaths);
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
  auto result = api_.patch(name, patch->dump());
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

Result<void> NodeLabeler::sync(const std::string& name, const ObjectCache& nodes) {
  auto node = nodes.get("", name);
  if (!node) {
    if (name == options_.nodeName) {
      log::warn("node not found; waiting for it to appear", {{"node", name}});
    }
    return {};  // a new node arrives as an add event
  }
  if (auto patched = reconcile(*node); !patched) {
    errors_.inc();
    return fail(patched.error());
  }
  if (!options_.allNodes) {
    ready_ = true;
  }
  return {};
}

void NodeLabeler::probeGpu(Controller& controller) {
  const bool present = gpuPresent(options_.gpuProbePaths);
  if (present != gpuPresent_.exchange(present)) {
    log::info("GPU presence changed", {{"node", options_.nodeName}, {"present", present}});
    controller.enqueue(options_.nodeName);
  }
}

void NodeLabeler::run(std::stop_token stop, ObjectCache& nodes) {
  Controller controller(
      {.name = "labeler", .workers = options_.allNodes ? static_cast<int>(options_.workers) : 1},
      [this, &nodes](const std::string& name) -> Result<SyncResult> {
        if (auto synced = sync(name, nodes); !synced) {
          return fail(synced.error());
        }
        return SyncResult{};
      });
  nodes.addHandlers(controller.enqueueObjects());
  nodes.start();

  std::jthread gpuProbe;
  if (!options_.nodeName.empty()) {
    gpuProbe = std::jthread([this, &controller, stop] {
      while (clock_->sleepUnlessStopped(stop, options_.gpuProbeInterval)) {
        probeGpu(controller);
      }
    });
  }
  // Asked until it answers true: what follows `return false` runs once, at the sync.
  controller.run(stop, [this, &nodes] {
    if (!nodes.hasSynced()) {
      return false;
    }
    if (options_.allNodes) {
      ready_ = true;
    } else if (!nodes.get("", options_.nodeName)) {
      log::warn("node not found; waiting for it to appear", {{"node", options_.nodeName}});
    }
    return true;
  });
}

Result<void> NodeLabeler::reconcileOnce() {
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    auto node = api_.get(options_.nodeName);
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
