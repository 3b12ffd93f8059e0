#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace gvirtus {

// Callbacks of an ObjectCache. Any of them may be empty. They run on the cache's thread,
// one at a time and in the order the changes were observed, outside the store lock (a
// handler may call get() and list()). A handler that blocks stalls the cache.
struct ResourceEventHandlers {
  std::function<void(const nlohmann::json& object)> onAdd;
  std::function<void(const nlohmann::json& old, const nlohmann::json& now)> onUpdate;
  // The object's last state: from the DELETED event, or the last one the cache held when
  // the deletion was found by a relist (it happened while the watch was down).
  std::function<void(const nlohmann::json& object)> onDelete;
};

// An object as the cache holds it: shared and immutable, so that readers get it without a
// copy and the cache replaces it, not changes it, when a newer version arrives.
using ObjectSnapshot = std::shared_ptr<const nlohmann::json>;

// The store key of an object: "namespace/name", or "name" when it has no namespace.
std::string cacheKey(const nlohmann::json& object);
std::string cacheKey(const std::string& ns, const std::string& name);
// The namespace and name of a store key (client-go's SplitMetaNamespaceKey); the namespace
// is empty for "name".
std::pair<std::string, std::string> splitCacheKey(const std::string& key);

// What a controller uses of a cache of one kind of object (client-go's informer + lister).
// ResourceCache is the one that lists and watches the API server; a unit test hands a
// controller one it fills and changes itself (tests/support/fake_object_cache.h), so that
// the controller runs without HTTP.
class ObjectCache {
 public:
  virtual ~ObjectCache() = default;

  // Before start(); handlers added later are ignored.
  virtual void addHandlers(ResourceEventHandlers handlers) = 0;
  // Starts filling the cache; a second call does nothing.
  virtual void start() = 0;
  // True once the first contents have been stored and their onAdd handlers have run.
  virtual bool hasSynced() const = 0;

  // `ns` is ignored for cluster-scoped kinds. Null when the store does not hold it.
  virtual ObjectSnapshot get(const std::string& ns, const std::string& name) const = 0;
  virtual std::vector<ObjectSnapshot> list() const = 0;
};

}  // namespace gvirtus
