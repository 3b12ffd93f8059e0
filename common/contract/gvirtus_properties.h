#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/base/error.h"

namespace gvirtus {

// The GVirtuS frontend plugins a properties.json lists by default.
const std::vector<std::string>& defaultPlugins();

// Renders the frontend's properties.json for one backend (docs/backend.md, "GVirtuS
// facts"): one tcp/ip communicator whose values are JSON strings, and
// secure_application false. GVirtuS silently drops a server_address that is not a dotted
// IPv4 address, so anything else is an error here; so is a port outside 1-65535.
Result<std::string> renderProperties(const std::string& ipv4, int port,
                                     const std::vector<std::string>& plugins);

// renderProperties for one plugin list, kept per backend: the text depends on nothing else,
// and admission renders it for every pod (a tenth of a review's work). Thread-safe; holds
// the texts of at most 1024 backends (it starts over past that).
class PropertiesCache {
 public:
  explicit PropertiesCache(std::vector<std::string> plugins);
  Result<std::string> forBackend(const std::string& ipv4, int port);

 private:
  const std::vector<std::string> plugins_;
  std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::string> rendered_;
};

}  // namespace gvirtus
