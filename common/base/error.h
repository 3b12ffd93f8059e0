#pragma once

#include <expected>
#include <string>
#include <utility>

namespace gvirtus {

// The one error type of the tree. Library code returns Result<T>; exceptions thrown by
// third-party libraries are caught where they are called and turned into an Error.
struct Error {
  std::string message;
  // HTTP status when the error came from an HTTP exchange (0 otherwise).
  int httpStatus = 0;
  // Kubernetes Status.reason (NotFound, Conflict, Expired, ...) when the API server sent one.
  std::string reason;

  // Returns the same error with `what` prepended, so messages read outer-to-inner.
  Error context(const std::string& what) const {
    Error e = *this;
    e.message = what + ": " + message;
    return e;
  }
  bool isNotFound() const { return httpStatus == 404; }
  bool isConflict() const { return httpStatus == 409; }
  bool isGone() const { return httpStatus == 410; }
};

template <typename T>
using Result = std::expected<T, Error>;

// Shorthand for returning an error: `return fail("bad port");`.
inline std::unexpected<Error> fail(std::string message, int httpStatus = 0,
                                   std::string reason = {}) {
  return std::unexpected<Error>(Error{std::move(message), httpStatus, std::move(reason)});
}
inline std::unexpected<Error> fail(Error error) {
  return std::unexpected<Error>(std::move(error));
}

}  // namespace gvirtus
