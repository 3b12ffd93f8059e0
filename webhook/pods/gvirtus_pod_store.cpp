#include "webhook/pods/gvirtus_pod_store.h"

#include <exception>
#include <utility>

#include "common/base/json_access.h"
#include "common/telemetry/log.h"

namespace gvirtus::webhook {

using nlohmann::json;

GvirtusPodStore::GvirtusPodStore(ObjectCache& source) : source_(source) {
  source_.addHandlers({.onAdd = [this](const json& pod) { added(pod); },
                       .onUpdate = [this](const json& old, const json& now) { updated(old, now); },
                       .onDelete = [this](const json& pod) { deleted(pod); }});
}

void GvirtusPodStore::addHandlers(ResourceEventHandlers handlers) {
  if (started_.load()) {
    log::warn("GVirtuS pod handlers added after start are ignored");
    return;
  }
  handlers_.push_back(std::move(handlers));
}

void GvirtusPodStore::start() {
  started_.store(true);
  source_.start();
}

void GvirtusPodStore::tell(const std::function<void(const ResourceEventHandlers&)>& call) const {
  for (const auto& h : handlers_) {
    try {
      call(h);
    } catch (const std::exception& e) {
      // As ResourceCache does: one handler's bug must not keep the event from the others.
      log::error("GVirtuS pod handler threw", {{"error", e.what()}});
    }
  }
}

GvirtusPodSnapshot GvirtusPodStore::replace(const std::string& key, GvirtusPodSnapshot record) {
  std::lock_guard lock(mutex_);
  auto it = records_.find(key);
  GvirtusPodSnapshot before = it != records_.end() ? it->second : nullptr;
  if (record) {
    records_.insert_or_assign(key, std::move(record));
  } else if (it != records_.end()) {
    records_.erase(it);
  }
  return before;
}

void GvirtusPodStore::added(const json& pod) {
  replace(cacheKey(pod), std::make_shared<const GvirtusPod>(GvirtusPod::from(pod, &strings_)));
  tell([&](const ResourceEventHandlers& h) {
    if (h.onAdd) {
      h.onAdd(pod);
    }
  });
}

void GvirtusPodStore::updated(const json& old, const json& now) {
  const GvirtusPodSnapshot before =
      replace(cacheKey(now), std::make_shared<const GvirtusPod>(GvirtusPod::from(now, &strings_)));
  // A source without holdObjects hands out only the name as `old`.
  const json was = before ? before->document() : old;
  tell([&](const ResourceEventHandlers& h) {
    if (h.onUpdate) {
      h.onUpdate(was, now);
    }
  });
}

void GvirtusPodStore::deleted(const json& pod) {
  const GvirtusPodSnapshot before = replace(cacheKey(pod), nullptr);
  // The state the watch left it in, where the source hands out only its name (a relist found
  // it gone); the final state itself where the source has it.
  const json last =
      before && memberAt(pod, {"metadata", "uid"}) == nullptr ? before->document() : pod;
  tell([&](const ResourceEventHandlers& h) {
    if (h.onDelete) {
      h.onDelete(last);
    }
  });
}

ObjectSnapshot GvirtusPodStore::get(const std::string& ns, const std::string& name) const {
  const GvirtusPodSnapshot held = record(ns, name);
  return held ? std::make_shared<const json>(held->document()) : nullptr;
}

std::vector<ObjectSnapshot> GvirtusPodStore::list() const {
  std::vector<ObjectSnapshot> out;
  for (const auto& held : records()) {
    out.push_back(std::make_shared<const json>(held->document()));
  }
  return out;
}

GvirtusPodSnapshot GvirtusPodStore::record(const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = records_.find(cacheKey(ns, name));
  return it != records_.end() ? it->second : nullptr;
}

std::vector<GvirtusPodSnapshot> GvirtusPodStore::records() const {
  std::lock_guard lock(mutex_);
  std::vector<GvirtusPodSnapshot> out;
  out.reserve(records_.size());
  for (const auto& [key, held] : records_) {
    out.push_back(held);
  }
  return out;
}

size_t GvirtusPodStore::size() const {
  std::lock_guard lock(mutex_);
  return records_.size();
}

}  // namespace gvirtus::webhook
