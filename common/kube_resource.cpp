#include "common/kube_resource.h"

namespace gvirtus {
namespace {

// Path segments are names the API server validates; anything outside the RFC 3986 `pchar`
// set is percent-encoded so that a hostile name cannot change the path or add a query.
std::string segment(const std::string& text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~' || c == ':' || c == '@') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0x0f];
    }
  }
  return out;
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
