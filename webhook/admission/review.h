#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/error.h"
#include "common/base/json_patch.h"

// AdmissionReview admission.k8s.io/v1, as a mutating webhook receives and answers it.
namespace gvirtus::webhook {

struct AdmissionRequest {
  std::string uid;
  // request.kind of the object under review: {"group":"","version":"v1","kind":"Pod"}.
  std::string group;
  std::string version;
  std::string kind;
  std::string subResource;
  std::string operation;  // CREATE, UPDATE, DELETE, CONNECT
  std::string ns;
  std::string name;  // empty for generateName objects on CREATE
  bool dryRun = false;
  nlohmann::json object;  // null for DELETE

  bool isPod() const { return group.empty() && version == "v1" && kind == "Pod"; }
};

// What parsing a JSON text would build, counted outside strings without allocating: the
// memory a parse takes follows the number of values more than the text's size.
struct JsonShape {
  int depth = 0;           // the deepest nesting of arrays and objects
  std::size_t values = 0;  // at least the number of values (one per container, separator)
};
JsonShape shapeOf(std::string_view text);

// Parses an AdmissionReview request body whose shape (shapeOf) is `shape`. Anything else
// (too deep, too many values, not JSON, not an admission.k8s.io/v1 AdmissionReview, no
// request, no uid) is an error whose message the HTTP layer sends back with status 400.
Result<AdmissionRequest> parseAdmissionReview(std::string_view body, const JsonShape& shape);
inline Result<AdmissionRequest> parseAdmissionReview(std::string_view body) {
  return parseAdmissionReview(body, shapeOf(body));
}

struct AdmissionResponse {
  std::string uid;
  bool allowed = true;
  // For a denial: the HTTP-like code and message the API server shows the client.
  int code = 0;
  std::string message;
  std::vector<std::string> warnings;
  JsonPatch patch;  // sent as patchType JSONPatch when not empty

  static AdmissionResponse allow(std::string uid) {
    AdmissionResponse r;
    r.uid = std::move(uid);
    return r;
  }
  static AdmissionResponse deny(std::string uid, int code, std::string message) {
    AdmissionResponse r;
    r.uid = std::move(uid);
    r.allowed = false;
    r.code = code;
    r.message = std::move(message);
    return r;
  }
};

// The AdmissionReview answer as compact JSON text: the same uid, the patch base64-encoded.
std::string renderAdmissionReview(const AdmissionResponse& response);

}  // namespace gvirtus::webhook
