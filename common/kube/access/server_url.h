#pragma once

#include <string>

#include "common/base/error.h"

// The API server's URL as a kubeconfig names it. Private to the KubeClient (kube_*.cpp).
namespace gvirtus::kube_detail {

struct ServerUrl {
  bool tls = true;
  std::string host;  // without IPv6 brackets
  int port = 443;
  std::string basePath;  // "" or "/prefix" (no trailing slash)
};

// "http(s)://host[:port][/prefix]", the host an IPv6 literal in brackets or a name.
Result<ServerUrl> parseServerUrl(const std::string& server);

}  // namespace gvirtus::kube_detail
