#include "common/http/router.h"

#include <cctype>
#include <mutex>

namespace gvirtus {

namespace {

std::string upper(std::string s) {
  for (char& c : s) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return s;
}

}  // namespace

void HttpRouter::add(std::string method, std::string path, HttpHandler handler) {
  std::unique_lock lock(mutex_);
  routes_[std::move(path)][upper(std::move(method))] = std::move(handler);
}

HttpRouter::Route HttpRouter::find(const std::string& method, const std::string& path) const {
  Route route;
  std::shared_lock lock(mutex_);
  auto found = routes_.find(path);
  if (found == routes_.end()) {
    return route;
  }
  const auto& methods = found->second;
  auto m = methods.find(method);
  if (m == methods.end() && method == "HEAD") {
    m = methods.find("GET");
  }
  if (m != methods.end()) {
    route.handler = m->second;
    return route;
  }
  // The Allow field of a 405, only when one is owed.
  for (const auto& [name, h] : methods) {
    if (!route.allowed.empty()) {
      route.allowed += ", ";
    }
    route.allowed += name;
    if (name == "GET" && !methods.contains("HEAD")) {
      route.allowed += ", HEAD";
    }
  }
  return route;
}

}  // namespace gvirtus
