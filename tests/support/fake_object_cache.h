#pragma once

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/base/json_access.h"
#include "common/cache/object_cache.h"

namespace gvirtus::testing {

// An ObjectCache a unit test fills and changes itself: each change runs the handlers at
// once, on the test's thread, as a watch event would on the cache's. It is synced from
// start() on, unless the test holds that back with holdSync().
class FakeObjectCache final : public ObjectCache {
 public:
  void addHandlers(ResourceEventHandlers handlers) override {
    std::lock_guard lock(mutex_);
    handlers_.push_back(std::move(handlers));
  }
  void start() override {
    std::lock_guard lock(mutex_);
    started_ = true;
  }
  bool hasSynced() const override {
    std::lock_guard lock(mutex_);
    return started_ && !holdSync_;
  }
  ObjectSnapshot get(const std::string& ns, const std::string& name) const override {
    std::lock_guard lock(mutex_);
    auto it = objects_.find(cacheKey(ns, name));
    return it == objects_.end() ? nullptr : it->second;
  }
  std::vector<ObjectSnapshot> list() const override {
    std::lock_guard lock(mutex_);
    std::vector<ObjectSnapshot> all;
    for (const auto& [key, object] : objects_) {
      all.push_back(object);
    }
    return all;
  }

  void holdSync(bool hold) {
    std::lock_guard lock(mutex_);
    holdSync_ = hold;
  }
  bool started() const {
    std::lock_guard lock(mutex_);
    return started_;
  }

  // Adds or replaces the object and tells the handlers.
  void put(nlohmann::json object) {
    auto now = std::make_shared<const nlohmann::json>(std::move(object));
    ObjectSnapshot old;
    std::vector<ResourceEventHandlers> handlers;
    {
      std::lock_guard lock(mutex_);
      auto& slot = objects_[cacheKey(*now)];
      old = slot;
      slot = now;
      handlers = handlers_;
    }
    for (const auto& h : handlers) {
      if (old && h.onUpdate) {
        h.onUpdate(*old, *now);
      } else if (!old && h.onAdd) {
        h.onAdd(*now);
      }
    }
  }

  void remove(const std::string& ns, const std::string& name) { removeAs(ns, name, nullptr); }

  // Removes the object; the handlers are told of `last` as the API server's DELETED event
  // carries it (a pod deleted at once, with its deletionTimestamp; one that left a label
  // selector, without the label), not of the object held.
  void removeAs(const nlohmann::json& last) {
    removeAs(stringAt(last, {"metadata", "namespace"}), stringAt(last, {"metadata", "name"}),
             &last);
  }

 private:
  void removeAs(const std::string& ns, const std::string& name, const nlohmann::json* last) {
    ObjectSnapshot old;
    std::vector<ResourceEventHandlers> handlers;
    {
      std::lock_guard lock(mutex_);
      auto it = objects_.find(cacheKey(ns, name));
      if (it == objects_.end()) {
        return;
      }
      old = it->second;
      objects_.erase(it);
      handlers = handlers_;
    }
    for (const auto& h : handlers) {
      if (h.onDelete) {
        h.onDelete(last != nullptr ? *last : *old);
      }
    }
  }

  mutable std::mutex mutex_;
  std::map<std::string, ObjectSnapshot> objects_;
  std::vector<ResourceEventHandlers> handlers_;
  bool started_ = false;
  bool holdSync_ = false;
};

}  // namespace gvirtus::testing
