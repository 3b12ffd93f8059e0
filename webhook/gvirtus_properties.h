#pragma once

#include <string>
#include <vector>

#include "common/error.h"

namespace gvirtus::webhook {

// The GVirtuS frontend plugins a properties.json lists by default.
const std::vector<std::string>& defaultPlugins();

// Renders the frontend's properties.json for one backend (docs/backend.md, "GVirtuS
// facts"): one tcp/ip communicator whose values are JSON strings, and
// secure_application false. GVirtuS silently drops a server_address that is not a dotted
// IPv4 address, so anything else is an error here; so is a port outside 1-65535.
Result<std::string> renderProperties(const std::string& ipv4, int port,
                                     const std::vector<std::string>& plugins);

}  // namespace gvirtus::webhook
