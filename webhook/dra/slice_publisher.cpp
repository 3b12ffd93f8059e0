#include "webhook/dra/slice_publisher.h"

#include <optional>
#include <vector>

#include "common/base/json_access.h"
#include "common/telemetry/log.h"
#include "webhook/dra/binding.h"
#include "webhook/dra/slice.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// Slices are few (one per backend pod) and writes to them rare: one worker keeps the
// order of a backend's changes plain.
constexpr int kWorkers = 1;
constexpr auto kSyncPoll = std::chrono::milliseconds(200);

// Everything of a backend that resourceSliceFor() reads, and nothing of its load of the
// moment (connections, memory used, utilization, when it was reported).
std::string offerOf(const Backend& backend) {
  json gpus = json::array();
  if (backend.load) {
    for (const auto& gpu : backend.load->gpus) {
      gpus.push_back({gpu.index, gpu.memoryTotalMiB, gpu.uuid, gpu.model});
    }
  }
  return json{backend.endpoint(),
              backend.node,
              backend.zone,
              backend.draining,
              backend.load.has_value(),
              backend.load ? backend.load->maxSessions : 0,
              std::move(gpus)}
      .dump();
}

Result<void> written(const Result<json>& answer) {
  if (!answer) {
    return fail(answer.error());
  }
  return {};
}

}  // namespace

SliceApi sliceApi(KubeClient& client) {
  return {.create =
              [&client](const json& slice) {
                return written(client.create(kResourceSlices, "", slice));
              },
          .update =
              [&client](const json& slice) {
                return written(client.update(kResourceSlices, "",
                                             stringAt(slice, {"metadata", "name"}), slice));
              },
          .remove =
              [&client](const std::string& name, const std::string& uid) {
                return client.remove(kResourceSlices, "", name, uid);
              }};
}

std::string sliceFieldSelector() {
  return std::string("spec.driver=") + kDraDriver;
}

SlicePublisher::SlicePublisher(const BackendSource& backends, ObjectCache& slices, SliceApi api,
                               SlicePublisherOptions options)
    : backends_(backends),
      slices_(slices),
      api_(std::move(api)),
      taintDraining_(options.taintDraining),
      bindingConditions_(options.bindingConditions),
      leader_(ControllerOptions{.name = "dra-slices",
                                .workers = kWorkers,
                                .backoffInitial = options.backoffInitial,
                                .backoffMax = options.backoffMax,
                                .syncPoll = kSyncPoll},
              [this](const std::string& name) -> Result<SyncResult> {
                if (auto wrote = sync(name); !wrote) {
                  return fail(wrote.error());
                }
                return SyncResult{};
              }) {
  auto own = [this](const json& slice) { leader_.enqueue(cacheKey(slice)); };
  slices_.addHandlers({.onAdd = own,
                       .onUpdate = [own](const json&, const json& now) { own(now); },
                       .onDelete = own});
}

void SlicePublisher::backendsChanged() {
  std::map<std::string, std::string> offers;
  for (const auto& backend : *backends_.backends()) {
    if (!backend.podName.empty()) {
      offers.emplace(sliceName(backend), offerOf(backend));
    }
  }
  std::vector<std::string> changed;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [name, offer] : offers) {
      if (auto was = offers_.find(name); was == offers_.end() || was->second != offer) {
        changed.push_back(name);
      }
    }
    for (const auto& [name, offer] : offers_) {
      if (!offers.contains(name)) {
        changed.push_back(name);
      }
    }
    offers_ = std::move(offers);
  }
  for (const auto& name : changed) {
    leader_.enqueue(name);
  }
}

void SlicePublisher::enqueueAll() {
  for (const auto& backend : *backends_.backends()) {
    if (!backend.podName.empty()) {
      leader_.enqueue(sliceName(backend));
    }
  }
  for (const auto& slice : slices_.list()) {
    leader_.enqueue(cacheKey(*slice));
  }
}

Result<bool> SlicePublisher::sync(const std::string& name) {
  std::optional<json> desired;
  const BackendSnapshot backends = backends_.backends();
  for (const auto& backend : *backends) {
    if (!backend.podName.empty() && sliceName(backend) == name) {
      desired = resourceSliceFor(backend, 1, taintDraining_);
      if (desired && bindingConditions_) {
        addBindingConditions(*desired);
      }
      break;
    }
  }
  const ObjectSnapshot held = slices_.get("", name);
  if (!desired) {
    if (!held) {
      return false;
    }
    if (auto removed = remove(*held); !removed) {
      return fail(removed.error().context("withdraw ResourceSlice " + name));
    }
    log::info("withdrew the ResourceSlice of a backend that has nothing to offer",
              {{"slice", name}});
    return true;
  }
  if (!held) {
    // Already there (another leader's, not yet in this cache): a conflict, retried once
    // the cache has it.
    if (auto created = api_.create(*desired); !created) {
      return fail(created.error().context("publish ResourceSlice " + name));
    }
    log::info("published the ResourceSlice of a backend", {{"slice", name}});
    return true;
  }
  switch (compareSlices(*held, *desired)) {
    case SliceChange::kNone:
      return false;
    case SliceChange::kReplace: {
      // Someone else's slice under this name (a node's, one with another pool): deleted, and
      // its delete event brings the sync that creates the right one.
      if (auto removed = remove(*held); !removed) {
        return fail(removed.error().context("replace ResourceSlice " + name));
      }
      log::warn("deleted a ResourceSlice that is not what the publisher wrote, to write it again",
                {{"slice", name}});
      return true;
    }
    case SliceChange::kUpdate:
      break;
  }
  // Its devices changed, or someone else edited them: the pool's next generation, over the
  // version this cache holds.
  const json* generation = memberAt(*held, {"spec", "pool", "generation"});
  const int64_t next =
      (generation != nullptr && generation->is_number_integer() ? generation->get<int64_t>() : 0) +
      1;
  (*desired)["spec"]["pool"]["generation"] = next;
  (*desired)["metadata"]["resourceVersion"] = stringAt(*held, {"metadata", "resourceVersion"});
  if (auto updated = api_.update(*desired); !updated) {
    return fail(updated.error().context("update ResourceSlice " + name));
  }
  log::info("updated the ResourceSlice of a backend", {{"slice", name}, {"generation", next}});
  return true;
}

Result<void> SlicePublisher::remove(const json& held) {
  // Only the slice looked at (its uid): one made again meanwhile is the next sync's.
  auto removed = api_.remove(cacheKey(held), stringAt(held, {"metadata", "uid"}));
  if (!removed && !removed.error().isNotFound()) {
    return removed;
  }
  return {};
}

void SlicePublisher::run(std::stop_token stop) {
  log::info("DRA slice publisher started", {{"driver", kDraDriver}});
  leader_.run(stop, {.synced = [this] { return backends_.ready() && slices_.hasSynced(); },
                     .enqueueAll = [this] { enqueueAll(); }});
  log::info("DRA slice publisher stopped");
}

}  // namespace gvirtus::webhook
