#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/cache/object_cache.h"
#include "webhook/pods/gvirtus_pod.h"

namespace gvirtus::webhook {

using GvirtusPodSnapshot = std::shared_ptr<const GvirtusPod>;

// Every GVirtuS pod of the cluster as a GvirtusPod record, kept by the events of a cache of
// them (its `source`: a ResourceCache with frontendFields() as transform and holdObjects off
// holds nothing else of them). It is that cache to its readers: handlers added here get the
// documents the source hands out, with `old` (and a deleted pod's last state) rebuilt from
// the record held until then, and get() builds the one document asked for. Who reads many
// pods reads records().
class GvirtusPodStore final : public ObjectCache {
 public:
  // Adds its handlers to `source`, which must not have started and must outlive the store.
  explicit GvirtusPodStore(ObjectCache& source);

  // Before start(); handlers added later are ignored with a warning.
  void addHandlers(ResourceEventHandlers handlers) override;
  // Starts the source.
  void start() override;
  bool hasSynced() const override { return source_.hasSynced(); }
  // The pod's document (GvirtusPod::document()), built for this call.
  ObjectSnapshot get(const std::string& ns, const std::string& name) const override;
  // Every pod's document, each built for this call: for a few pods only.
  std::vector<ObjectSnapshot> list() const override;

  GvirtusPodSnapshot record(const std::string& ns, const std::string& name) const;
  std::vector<GvirtusPodSnapshot> records() const;
  size_t size() const;

 private:
  void added(const nlohmann::json& pod);
  void updated(const nlohmann::json& old, const nlohmann::json& now);
  void deleted(const nlohmann::json& pod);
  void tell(const std::function<void(const ResourceEventHandlers&)>& call) const;
  // Replaces (or with null removes) the record of `key`; returns the one held before.
  GvirtusPodSnapshot replace(const std::string& key, GvirtusPodSnapshot record);

  ObjectCache& source_;
  // Fixed once started; called on the source's thread.
  std::vector<ResourceEventHandlers> handlers_;
  std::atomic<bool> started_ = false;

  StringPool strings_;  // the records' annotation values; the source's thread only
  mutable std::mutex mutex_;
  std::map<std::string, GvirtusPodSnapshot> records_;  // by "namespace/name"
};

}  // namespace gvirtus::webhook
