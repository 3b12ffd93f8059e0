#include "common/cache/object_cache.h"

#include "common/base/json_access.h"

namespace gvirtus {

std::string cacheKey(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

std::pair<std::string, std::string> splitCacheKey(const std::string& key) {
  const size_t slash = key.find('/');
  if (slash == std::string::npos) {
    return {"", key};
  }
  return {key.substr(0, slash), key.substr(slash + 1)};
}

std::string cacheKey(const nlohmann::json& object) {
  return cacheKey(stringAt(object, {"metadata", "namespace"}),
                  stringAt(object, {"metadata", "name"}));
}

}  // namespace gvirtus
