#include "common/kube/access/server_url.h"

namespace gvirtus::kube_detail {

Result<ServerUrl> parseServerUrl(const std::string& server) {
  ServerUrl url;
  std::string rest;
  if (server.starts_with("https://")) {
    rest = server.substr(8);
  } else if (server.starts_with("http://")) {
    url.tls = false;
    url.port = 80;
    rest = server.substr(7);
  } else {
    return fail("server \"" + server + "\" is not an http(s) URL");
  }
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) {
    url.basePath = rest.substr(slash);
    while (!url.basePath.empty() && url.basePath.back() == '/') {
      url.basePath.pop_back();
    }
  }
  std::string portText;
  if (authority.starts_with("[")) {
    const size_t close = authority.find(']');
    if (close == std::string::npos) {
      return fail("server \"" + server + "\": unterminated IPv6 address");
    }
    url.host = authority.substr(1, close - 1);
    std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') {
        return fail("server \"" + server + "\": bad host");
      }
      portText = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    url.host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      portText = authority.substr(colon + 1);
    }
  }
  if (url.host.empty()) {
    return fail("server \"" + server + "\": no host");
  }
  if (!portText.empty()) {
    if (portText.size() > 5 || portText.find_first_not_of("0123456789") != std::string::npos) {
      return fail("server \"" + server + "\": bad port");
    }
    url.port = std::stoi(portText);
    if (url.port < 1 || url.port > 65535) {
      return fail("server \"" + server + "\": bad port");
    }
  }
  return url;
}

}  // namespace gvirtus::kube_detail
