#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "common/base/error.h"
#include "common/cache/object_cache.h"
#include "common/kube/api/resource.h"
#include "common/kube/client.h"
#include "common/time/clock.h"
#include "common/time/duration.h"

namespace gvirtus {

class Backoff;

// One change found between two contents of the store.
struct StoreDelta {
  enum class Type { Added, Updated, Deleted };
  Type type;
  std::string key;
  ObjectSnapshot old;  // null for Added
  ObjectSnapshot now;  // for Deleted: the last state held
};

// What a relist changed: objects only in `after` are Added, only in `before` Deleted, and
// in both with a different metadata.resourceVersion (or, lacking one, different content)
// Updated. Unchanged objects produce nothing, so after a relist handlers see exactly what
// happened while the watch was down. Sorted by key within each type: adds, updates, deletes.
std::vector<StoreDelta> diffStores(const std::map<std::string, ObjectSnapshot>& before,
                                   const std::map<std::string, ObjectSnapshot>& after);

struct ResourceCacheOptions {
  int64_t pageSize = 500;  // list page size (limit); 0: no paging
  Duration backoffInitial = std::chrono::milliseconds(800);
  Duration backoffMax = std::chrono::seconds(30);
  int watchTimeoutSeconds = 0;  // 0: the client's default (randomized 5-10 minutes)
  // Applied to every listed or watched object before it is stored and handed to handlers
  // (client-go's SetTransform): a cache that reads a few fields of many objects keeps only
  // those. It must keep metadata.name, namespace and resourceVersion. Empty: none.
  std::function<nlohmann::json(nlohmann::json)> transform;
  // Which objects the cache holds at all, asked of each listed or watched object before
  // `transform`: one it refuses is not stored (and one that stops being kept leaves the
  // store as if deleted), so that a watch of every pod holds only the few a controller
  // reads. Empty: all.
  std::function<bool(const nlohmann::json&)> keep = {};
  // A kind the API server does not serve (404 on the list: a CRD not installed, such as
  // KAI-Scheduler's PodGroups), or that this account may not list (403: a ClusterRole older
  // than the binary), is an empty store that counts as synced (absent() says so), so that
  // what the cache only adds to (gangs) does not stop the rest. The list is tried again
  // every few seconds (at most backoffMax): a CRD installed or a right granted later is
  // seen soon. Off: both are retried with backoff and the cache never syncs.
  bool absentMeansEmpty = false;
  // What the waits between attempts sleep on.
  Clock* clock = &systemClock();
  // Off: the store keeps of each object its resourceVersion alone (for a relist's diff), and
  // get() and list() hand out nothing, for a cache whose one handler keeps what it reads in
  // records of its own (webhook/pods/gvirtus_pod_store.h): no object is held twice. Handlers get
  // the transformed object on add, on update and on a watched delete; `old`, and an object a
  // relist found gone, carry only metadata.namespace and name. A list is handed to the
  // handlers page by page, so the whole of it never stands in memory: a relist's additions
  // and changes come as its pages do, what is gone once the last page is in.
  bool holdObjects = true;
};

// A cache of one kind of Kubernetes object, kept current by list and watch (the shape of
// client-go's reflector + informer). Shared by the labeler, the webhook and controllers.
//
// The loop: list (paged) and replace the store, telling handlers what changed since the
// previous contents; watch from the list's resourceVersion with bookmarks (which only
// advance the resourceVersion); when a watch ends normally, watch again from the last
// resourceVersion; on 410 Gone list again; on any other error back off (0.8s doubling to
// 30s, reset after a success) and retry, one log line per failure with the reason.
//
// Reads are thread-safe and copy nothing: they hand out the snapshots the store holds.
class ResourceCache final : public ObjectCache {
 public:
  // `ns` empty: all namespaces (and the only choice for cluster-scoped kinds).
  ResourceCache(KubeClient& client, KubeResource resource, std::string ns = {},
                std::string labelSelector = {}, std::string fieldSelector = {},
                ResourceCacheOptions options = {});
  // Stops the thread (promptly: the watch is interrupted).
  ~ResourceCache() override;
  ResourceCache(const ResourceCache&) = delete;
  ResourceCache& operator=(const ResourceCache&) = delete;

  // Before start(); handlers added later are ignored with a warning.
  void addHandlers(ResourceEventHandlers handlers) override;
  // Starts the list-and-watch thread; a second call does nothing.
  void start() override;
  // Stops the thread and waits for it; the store keeps its contents. Idempotent.
  void stop();

  // True once the first list has been stored and its onAdd handlers have run.
  bool hasSynced() const override;
  // Waits for hasSynced() up to `timeout`; false on timeout or when stopped first.
  bool waitForSync(Duration timeout) const;

  // `ns` is ignored for cluster-scoped kinds. Null when the store does not hold it.
  ObjectSnapshot get(const std::string& ns, const std::string& name) const override;
  ObjectSnapshot getByKey(const std::string& key) const;
  std::vector<ObjectSnapshot> list() const override;
  std::vector<std::string> keys() const;
  size_t size() const;

  // With absentMeansEmpty: true while the last list was refused as absent (404 or 403),
  // false once a list worked.
  bool absent() const { return absent_.load(); }
  // Lists after the first one (410 Gone, or a failed list retried).
  int64_t relistCount() const { return relists_.load(); }
  // Watch requests that ended (normally or not); for tests and metrics.
  int64_t watchCount() const { return watches_.load(); }
  // The resourceVersion the next watch starts from.
  std::string resourceVersion() const;
  const KubeResource& resource() const { return resource_; }

 private:
  void run(std::stop_token stop);
  Result<void> listAndReplace(std::stop_token stop);
  // One list for run(): nullopt once listed; else how long to wait before the next try (a
  // kind not served or not allowed, with absentMeansEmpty: empty and looked at again later).
  std::optional<Duration> relist(std::stop_token stop, Backoff& backoff);
  // The store becomes `fresh` at `resourceVersion`; handlers are told what changed.
  void replaceStore(std::map<std::string, ObjectSnapshot> fresh, std::string resourceVersion);
  // What the store holds of `object`: itself, or without holdObjects its resourceVersion.
  ObjectSnapshot held(ObjectSnapshot object) const;
  // Without holdObjects: stores one listed object's version and tells the handlers what
  // changed against what the store held.
  void dispatchListed(const std::string& key, const ObjectSnapshot& object);
  // Returns the watch's outcome; `events` counts the events it delivered.
  Result<void> watchOnce(std::stop_token stop, int64_t& events);
  void applyEvent(const WatchEvent& event);
  void dispatch(const std::vector<StoreDelta>& deltas);

  KubeClient& client_;
  const KubeResource resource_;
  const std::string ns_;
  const std::string labelSelector_;
  const std::string fieldSelector_;
  const ResourceCacheOptions options_;

  mutable std::mutex mutex_;
  mutable std::condition_variable_any changed_;
  std::map<std::string, ObjectSnapshot> store_;
  std::string resourceVersion_;
  bool synced_ = false;
  bool stopped_ = false;

  std::vector<ResourceEventHandlers> handlers_;  // fixed once started
  std::atomic<bool> started_ = false;
  std::atomic<int64_t> lists_ = 0;
  std::atomic<bool> absent_ = false;
  std::atomic<int64_t> relists_ = 0;
  std::atomic<int64_t> watches_ = 0;
  std::jthread thread_;  // last member: stopped and joined first
};

}  // namespace gvirtus
