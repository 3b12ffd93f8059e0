#include "common/kube/api/resource.h"

#include "common/base/strings.h"

namespace gvirtus {
namespace {

// Path segments are names the API server validates; anything outside the RFC 3986 `pchar`
// set is percent-encoded so that a hostile name cannot change the path or add a query.
std::string segment(const std::string& text) {
  return percentEncode(text, ":@");
}

}  // namespace

std::string KubeResource::collectionPath(const std::string& ns) const {
  std::string path = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (namespaced && !ns.empty()) {
    path += "/namespaces/" + segment(ns);
  }
  return path + "/" + plural;
}

std::string KubeResource::objectPath(const std::string& ns, const std::string& name) const {
  return collectionPath(ns) + "/" + segment(name);
}

}  // namespace gvirtus
