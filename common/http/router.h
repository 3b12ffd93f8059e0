#pragma once

#include <map>
#include <shared_mutex>
#include <string>

#include "common/http/message.h"

// The handlers of an HttpServer by exact path and method; routes may be added while it
// serves. Internal to HttpServer.
namespace gvirtus {

class HttpRouter {
 public:
  // `method` in any case (GET, post, ...).
  void add(std::string method, std::string path, HttpHandler handler);

  struct Route {
    // Empty when no handler answers the method on the path.
    HttpHandler handler;
    // Without a handler, for a known path: the methods it has, as the Allow field of a 405
    // ("GET, HEAD, POST"); empty for an unknown path.
    std::string allowed;
  };
  // The handler of `method` on `path`; GET handlers also answer HEAD.
  Route find(const std::string& method, const std::string& path) const;

 private:
  mutable std::shared_mutex mutex_;
  std::map<std::string, std::map<std::string, HttpHandler>> routes_;  // path -> method -> h
};

}  // namespace gvirtus
