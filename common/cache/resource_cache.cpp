#include "common/cache/resource_cache.h"

#include <chrono>
#include <exception>
#include <utility>

#include "common/base/json_access.h"
#include "common/kube/watch_stream.h"
#include "common/telemetry/log.h"
#include "common/time/backoff.h"

namespace gvirtus {

using nlohmann::json;

namespace {

// A watch that ends this fast without a single event is treated as a failure, so that a
// server closing watches at once does not make the loop spin (client-go does the same).
constexpr auto kShortWatch = std::chrono::seconds(1);
// How often a kind found absent (ResourceCacheOptions::absentMeansEmpty) is listed again:
// soon after a CRD is installed, its objects count.
constexpr auto kAbsentRelist = std::chrono::seconds(5);

// An object's, or what a store without holdObjects keeps: the version alone, as a string.
std::string resourceVersionOf(const json& object) {
  return object.is_string() ? object.get<std::string>()
                            : stringAt(object, {"metadata", "resourceVersion"});
}

// What handlers get of an object a store without holdObjects kept only the version of.
json identityOf(const std::string& key) {
  auto [ns, name] = splitCacheKey(key);
  json metadata = {{"name", std::move(name)}};
  if (!ns.empty()) {
    metadata["namespace"] = std::move(ns);
  }
  return {{"metadata", std::move(metadata)}};
}

// "pods", "leases.coordination.k8s.io": how kubectl names a resource.
std::string resourceName(const KubeResource& resource) {
  return resource.group.empty() ? resource.plural : resource.plural + "." + resource.group;
}

bool sameVersion(const json& a, const json& b) {
  const std::string va = resourceVersionOf(a);
  const std::string vb = resourceVersionOf(b);
  if (!va.empty() && !vb.empty()) {
    return va == vb;
  }
  return a == b;
}

}  // namespace

std::vector<StoreDelta> diffStores(const std::map<std::string, ObjectSnapshot>& before,
                                   const std::map<std::string, ObjectSnapshot>& after) {
  std::vector<StoreDelta> added;
  std::vector<StoreDelta> updated;
  std::vector<StoreDelta> deleted;
  auto b = before.begin();
  auto a = after.begin();
  while (b != before.end() || a != after.end()) {
    if (b == before.end() || (a != after.end() && a->first < b->first)) {
      added.push_back({StoreDelta::Type::Added, a->first, nullptr, a->second});
      ++a;
    } else if (a == after.end() || b->first < a->first) {
      deleted.push_back({StoreDelta::Type::Deleted, b->first, b->second, b->second});
      ++b;
    } else {
      if (!sameVersion(*b->second, *a->second)) {
        updated.push_back({StoreDelta::Type::Updated, a->first, b->second, a->second});
      }
      ++a;
      ++b;
    }
  }
  std::vector<StoreDelta> all = std::move(added);
  all.insert(all.end(), std::make_move_iterator(updated.begin()),
             std::make_move_iterator(updated.end()));
  all.insert(all.end(), std::make_move_iterator(deleted.begin()),
             std::make_move_iterator(deleted.end()));
  return all;
}

ResourceCache::ResourceCache(KubeClient& client, KubeResource resource, std::string ns,
                             std::string labelSelector, std::string fieldSelector,
                             ResourceCacheOptions options)
    : client_(client),
      resource_(std::move(resource)),
      ns_(resource_.namespaced ? std::move(ns) : std::string()),
      labelSelector_(std::move(labelSelector)),
      fieldSelector_(std::move(fieldSelector)),
      options_(options) {}

ResourceCache::~ResourceCache() {
  stop();
}

void ResourceCache::addHandlers(ResourceEventHandlers handlers) {
  if (started_.load()) {
    log::warn("cache handlers added after start are ignored",
              {{"resource", resourceName(resource_)}});
    return;
  }
  handlers_.push_back(std::move(handlers));
}

void ResourceCache::start() {
  if (started_.exchange(true)) {
    return;
  }
  {
    std::lock_guard lock(mutex_);
    stopped_ = false;
  }
  thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
}

void ResourceCache::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
  }
  changed_.notify_all();
}

bool ResourceCache::hasSynced() const {
  std::lock_guard lock(mutex_);
  return synced_;
}

bool ResourceCache::waitForSync(Duration timeout) const {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [this] { return synced_ || stopped_; });
  return synced_;
}

ObjectSnapshot ResourceCache::get(const std::string& ns, const std::string& name) const {
  return getByKey(cacheKey(resource_.namespaced ? ns : std::string(), name));
}

ObjectSnapshot ResourceCache::getByKey(const std::string& key) const {
  if (!options_.holdObjects) {
    return nullptr;
  }
  std::lock_guard lock(mutex_);
  auto it = store_.find(key);
  return it == store_.end() ? nullptr : it->second;
}

std::vector<ObjectSnapshot> ResourceCache::list() const {
  if (!options_.holdObjects) {
    return {};
  }
  std::lock_guard lock(mutex_);
  std::vector<ObjectSnapshot> out;
  out.reserve(store_.size());
  for (const auto& [key, object] : store_) {
    out.push_back(object);
  }
  return out;
}

std::vector<std::string> ResourceCache::keys() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  out.reserve(store_.size());
  for (const auto& entry : store_) {
    out.push_back(entry.first);
  }
  return out;
}

size_t ResourceCache::size() const {
  std::lock_guard lock(mutex_);
  return store_.size();
}

std::string ResourceCache::resourceVersion() const {
  std::lock_guard lock(mutex_);
  return resourceVersion_;
}

void ResourceCache::run(std::stop_token stop) {
  Backoff backoff(options_.backoffInitial, options_.backoffMax);
  const std::string name = resourceName(resource_);
  bool needList = true;
  bool justListed = false;
  while (!stop.stop_requested()) {
    if (needList) {
      const std::optional<Duration> wait = relist(stop, backoff);
      if (stop.stop_requested()) {
        break;
      }
      if (wait) {
        if (!options_.clock->sleepUnlessStopped(stop, *wait)) {
          break;
        }
        continue;
      }
      needList = false;
      justListed = true;
    }

    int64_t events = 0;
    const auto began = std::chrono::steady_clock::now();
    auto watched = watchOnce(stop, events);
    watches_.fetch_add(1);
    if (stop.stop_requested()) {
      break;
    }
    const bool wasFresh = justListed;
    justListed = false;
    if (watched) {
      if (events > 0 || std::chrono::steady_clock::now() - began >= kShortWatch) {
        backoff.reset();
        continue;  // a normal end (timeoutSeconds): watch again from the last version
      }
      watched = fail("watch ended at once without events");
    }
    if (watched.error().isGone()) {
      log::info("cache watch expired, relisting",
                {{"resource", name}, {"error", watched.error().message}});
      needList = true;
      // A watch from a list's own version should never be too old; if it is, do not spin.
      if (wasFresh && events == 0) {
        const Duration wait = backoff.next();
        if (!options_.clock->sleepUnlessStopped(stop, wait)) {
          break;
        }
      }
      continue;
    }
    if (events > 0) {
      backoff.reset();  // it worked for a while: the failure is new
    }
    const Duration wait = backoff.next();
    log::warn("cache watch failed", {{"resource", name},
                                     {"error", watched.error().message},
                                     {"resourceVersion", resourceVersion()},
                                     {"retryIn", formatDuration(wait)}});
    if (!options_.clock->sleepUnlessStopped(stop, wait)) {
      break;
    }
  }
}

std::optional<Duration> ResourceCache::relist(std::stop_token stop, Backoff& backoff) {
  const std::string name = resourceName(resource_);
  auto listed = listAndReplace(stop);
  if (stop.stop_requested()) {
    return Duration::zero();
  }
  if (!listed && options_.absentMeansEmpty &&
      (listed.error().isNotFound() || listed.error().httpStatus == 403)) {
    const Duration wait = std::min<Duration>(options_.backoffMax, kAbsentRelist);
    absent_.store(true);  // before the store syncs: a reader never sees it served and empty
    if (!hasSynced() || size() > 0) {
      const json fields = {
          {"resource", name}, {"error", listed.error().message}, {"retryIn", formatDuration(wait)}};
      if (listed.error().isNotFound()) {
        log::info("cache: the API server does not serve this kind; empty until it does", fields);
      } else {
        log::warn("cache: not allowed to list this kind (RBAC); empty until it is", fields);
      }
      replaceStore({}, {});
    }
    return wait;
  }
  if (!listed) {
    const Duration wait = backoff.next();
    log::warn(
        "cache list failed",
        {{"resource", name}, {"error", listed.error().message}, {"retryIn", formatDuration(wait)}});
    return wait;
  }
  absent_.store(false);
  return std::nullopt;
}

Result<void> ResourceCache::listAndReplace(std::stop_token stop) {
  ListOptions options;
  options.labelSelector = labelSelector_;
  options.fieldSelector = fieldSelector_;
  options.limit = options_.pageSize;
  // Page by page, each transformed before the next is asked for: the whole list never
  // stands in memory as the API server sent it (50,000 pods: about a gigabyte).
  std::map<std::string, ObjectSnapshot> fresh;
  std::string resourceVersion;
  for (bool first = true; first || !options.continueToken.empty(); first = false) {
    auto page = client_.list(resource_, ns_, options);
    if (!page) {
      return fail(page.error().context("list " + resourceName(resource_)));
    }
    if (stop.stop_requested()) {
      return {};
    }
    if (first) {
      resourceVersion = std::move(page->resourceVersion);
    }
    for (auto& item : page->items) {
      std::string key = cacheKey(item);
      if (key.empty() || (options_.keep && !options_.keep(item))) {
        continue;
      }
      auto object = std::make_shared<const json>(
          options_.transform ? options_.transform(std::move(item)) : std::move(item));
      if (!options_.holdObjects) {
        dispatchListed(key, object);
      }
      fresh.emplace(std::move(key), held(std::move(object)));
    }
    options.continueToken = std::move(page->continueToken);
  }
  // Without holdObjects the store holds every listed object already: what differs is what
  // is gone.
  replaceStore(std::move(fresh), std::move(resourceVersion));
  return {};
}

ObjectSnapshot ResourceCache::held(ObjectSnapshot object) const {
  if (options_.holdObjects) {
    return object;
  }
  return std::make_shared<const json>(resourceVersionOf(*object));
}

void ResourceCache::dispatchListed(const std::string& key, const ObjectSnapshot& object) {
  // Stored at once, not when the list ends: what the handlers were told stays told when a
  // later page fails (the retried list then finds it changed or gone), and is not told again.
  ObjectSnapshot before;
  {
    std::lock_guard lock(mutex_);
    auto& slot = store_[key];
    before = std::exchange(slot, held(object));
  }
  if (!before) {
    dispatch({{StoreDelta::Type::Added, key, nullptr, object}});
  } else if (!sameVersion(*before, *held(object))) {
    dispatch({{StoreDelta::Type::Updated, key, before, object}});
  }
}

void ResourceCache::replaceStore(std::map<std::string, ObjectSnapshot> fresh,
                                 std::string resourceVersion) {
  std::vector<StoreDelta> deltas;
  {
    std::lock_guard lock(mutex_);
    deltas = diffStores(store_, fresh);
    store_ = std::move(fresh);
    resourceVersion_ = resourceVersion;
  }
  if (lists_.fetch_add(1) > 0) {
    relists_.fetch_add(1);
    log::info("cache relisted", {{"resource", resourceName(resource_)},
                                 {"changes", deltas.size()},
                                 {"resourceVersion", resourceVersion}});
  }
  dispatch(deltas);
  bool first = false;
  {
    std::lock_guard lock(mutex_);
    first = !synced_;
    synced_ = true;
  }
  if (first) {
    changed_.notify_all();
  }
}

Result<void> ResourceCache::watchOnce(std::stop_token stop, int64_t& events) {
  WatchOptions options;
  options.labelSelector = labelSelector_;
  options.fieldSelector = fieldSelector_;
  options.resourceVersion = resourceVersion();
  options.allowBookmarks = true;
  options.timeoutSeconds = options_.watchTimeoutSeconds;
  std::optional<Error> eventError;
  auto result = client_.watch(
      resource_, ns_, options,
      [&](const WatchEvent& event) {
        if (stop.stop_requested()) {
          return false;
        }
        if (event.type == "ERROR") {
          eventError = watchErrorOf(event);
          return false;
        }
        ++events;
        applyEvent(event);
        return true;
      },
      stop);
  if (eventError) {
    return fail(*eventError);
  }
  return result;
}

void ResourceCache::applyEvent(const WatchEvent& event) {
  const std::string version = resourceVersionOf(event.object);
  if (event.type == "BOOKMARK") {
    if (!version.empty()) {
      std::lock_guard lock(mutex_);
      resourceVersion_ = version;
    }
    return;
  }
  const std::string key = cacheKey(event.object);
  if (key.empty()) {
    log::debug("cache ignores an event without a name",
               {{"resource", resourceName(resource_)}, {"type", event.type}});
    return;
  }
  // An object no longer kept goes as a deleted one does.
  const bool kept = !options_.keep || options_.keep(event.object);
  ObjectSnapshot object;
  if (kept) {
    object = std::make_shared<const json>(options_.transform ? options_.transform(event.object)
                                                             : event.object);
  }
  std::vector<StoreDelta> deltas;
  {
    std::lock_guard lock(mutex_);
    auto it = store_.find(key);
    if ((event.type == "ADDED" || event.type == "MODIFIED") && !kept) {
      if (it != store_.end()) {
        deltas.push_back({StoreDelta::Type::Deleted, key, it->second, it->second});
        store_.erase(it);
      }
    } else if (event.type == "ADDED" || event.type == "MODIFIED") {
      if (it == store_.end()) {
        deltas.push_back({StoreDelta::Type::Added, key, nullptr, object});
        store_.emplace(key, held(object));
      } else {
        deltas.push_back({StoreDelta::Type::Updated, key, it->second, object});
        it->second = held(object);
      }
    } else if (event.type == "DELETED") {
      if (it != store_.end()) {
        // Its last state as held, where the final one is not kept.
        deltas.push_back(
            {StoreDelta::Type::Deleted, key, it->second, object ? object : it->second});
        store_.erase(it);
      }
    } else {
      log::debug("cache ignores an unknown event type",
                 {{"resource", resourceName(resource_)}, {"type", event.type}});
    }
    if (!version.empty()) {
      resourceVersion_ = version;
    }
  }
  dispatch(deltas);
}

void ResourceCache::dispatch(const std::vector<StoreDelta>& deltas) {
  for (const auto& delta : deltas) {
    // A version alone (a store without holdObjects) reaches handlers as the object's name.
    auto handed = [&](const ObjectSnapshot& object) {
      return object->is_string() ? std::make_shared<const json>(identityOf(delta.key)) : object;
    };
    const ObjectSnapshot old = delta.old ? handed(delta.old) : nullptr;
    const ObjectSnapshot now = handed(delta.now);
    for (const auto& h : handlers_) {
      try {
        switch (delta.type) {
          case StoreDelta::Type::Added:
            if (h.onAdd) {
              h.onAdd(*now);
            }
            break;
          case StoreDelta::Type::Updated:
            if (h.onUpdate) {
              h.onUpdate(*old, *now);
            }
            break;
          case StoreDelta::Type::Deleted:
            if (h.onDelete) {
              h.onDelete(*now);
            }
            break;
        }
      } catch (const std::exception& e) {
        // A handler's bug must not end the cache's thread (and the process with it).
        log::error(
            "cache handler threw",
            {{"resource", resourceName(resource_)}, {"key", delta.key}, {"error", e.what()}});
      }
    }
  }
}

}  // namespace gvirtus
