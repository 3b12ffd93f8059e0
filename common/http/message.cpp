// The lookups of an HttpRequest (common/http/message.h) into its headers and query.
#include <algorithm>

#include "common/base/strings.h"
#include "common/http/message.h"

namespace gvirtus {

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (equalsIgnoreCase(k, name)) {
      return v;
    }
  }
  return {};
}

bool HttpRequest::hasHeader(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(),
                     [&](const auto& kv) { return equalsIgnoreCase(kv.first, name); });
}

std::string HttpRequest::queryParam(std::string_view name) const {
  for (const auto& [k, v] : query) {
    if (k == name) {
      return v;
    }
  }
  return {};
}

bool HttpRequest::hasQueryParam(std::string_view name) const {
  return std::any_of(query.begin(), query.end(), [&](const auto& kv) { return kv.first == name; });
}

}  // namespace gvirtus
