#include "common/object_cache.h"

#include "common/json_access.h"

namespace gvirtus {

std::string cacheKey(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

std::string cacheKey(const nlohmann::json& object) {
  return cacheKey(stringAt(object, {"metadata", "namespace"}),
                  stringAt(object, {"metadata", "name"}));
}

}  // namespace gvirtus
