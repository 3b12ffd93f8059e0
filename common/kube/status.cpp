#include "common/kube/status.h"

#include <cstddef>
#include <string_view>

#include "common/base/json_access.h"

namespace gvirtus::kube_detail {
namespace {

// How much of a non-Status error body goes into a message.
constexpr size_t kMaxBodyInMessage = 200;

// The Kubernetes StatusReason that usually goes with an HTTP status.
std::string reasonForStatus(int status) {
  switch (status) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 406:
      return "NotAcceptable";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "RequestEntityTooLarge";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "";
  }
}

std::string oneLine(std::string_view text, size_t max) {
  std::string out;
  for (char c : text.substr(0, max)) {
    out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  }
  if (text.size() > max) {
    out += "...";
  }
  return out;
}

}  // namespace

Error statusError(const std::string& what, int httpStatus, const std::string& body) {
  Error error;
  error.httpStatus = httpStatus;
  std::string message;
  // Not JSON: the body itself (a proxy's HTML page, a plain text error) is the message.
  if (auto status = parseJson(body); status && status->is_object()) {
    if (auto it = status->find("reason"); it != status->end() && it->is_string()) {
      error.reason = it->get<std::string>();
    }
    if (auto it = status->find("message"); it != status->end() && it->is_string()) {
      message = it->get<std::string>();
    }
  }
  if (message.empty() && error.reason.empty()) {
    message = body.empty() ? "no response body" : oneLine(body, kMaxBodyInMessage);
  }
  std::string head = what + ": " + std::to_string(httpStatus);
  const std::string reason = error.reason.empty() ? reasonForStatus(httpStatus) : error.reason;
  if (!reason.empty()) {
    head += " " + reason;
  }
  error.message = message.empty() ? head : head + ": " + message;
  return error;
}

}  // namespace gvirtus::kube_detail
