#pragma once

#include <cstddef>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/error.h"

// The one JSON patch (RFC 6902) builder, with RFC 6901 pointers.
namespace gvirtus {

// Escapes one reference token: '~' -> "~0", '/' -> "~1".
std::string escapeJsonPointerToken(std::string_view token);

// Joins escaped tokens into a pointer:
// jsonPointer({"metadata", "annotations", "gvirtus.io/backend"})
//   == "/metadata/annotations/gvirtus.io~1backend". No tokens: "" (the whole document).
std::string jsonPointer(std::initializer_list<std::string_view> tokens);
std::string jsonPointer(const std::vector<std::string>& tokens);

// Splits a pointer into its unescaped tokens; "" gives no tokens. Errors on a pointer
// that does not start with '/' or holds a '~' not followed by 0 or 1.
Result<std::vector<std::string>> parseJsonPointer(std::string_view pointer);

// Builds a JSON patch, operation by operation. Paths are JSON pointers (jsonPointer()).
class JsonPatch {
 public:
  JsonPatch& add(std::string path, nlohmann::json value);
  JsonPatch& replace(std::string path, nlohmann::json value);
  JsonPatch& remove(std::string path);
  JsonPatch& test(std::string path, nlohmann::json value);
  // Appends every operation of `other`, in order.
  JsonPatch& append(const JsonPatch& other);

  // The patch that turns `from` into `to`: callers mutate a copy of a document and derive
  // the patch from the two (as controller-runtime's webhooks do) instead of building it
  // operation by operation. Every operation sets a value, so the patch applied twice
  // changes nothing more: an object that lost a member is written whole (a "remove"
  // applied twice would fail), an array that changed length is written whole (never
  // appended to with "-"), and an array of the same length is compared element by element.
  // Equal documents give an empty patch.
  static JsonPatch between(const nlohmann::json& from, const nlohmann::json& to);
  // The same, taking the values of the patch out of `to` instead of copying them: for a
  // mutated copy that is not needed afterwards.
  static JsonPatch between(const nlohmann::json& from, nlohmann::json&& to);

  bool empty() const { return ops_.empty(); }
  std::size_t size() const { return ops_.size(); }
  // The patch as a JSON array of operations.
  nlohmann::json toJson() const;
  // The same as compact text (toJson() dumped, without building the array).
  std::string dump() const;

 private:
  // `value` is moved into the operation (null: none, for remove).
  JsonPatch& push(std::string_view op, std::string path, nlohmann::json* value);

  // Plain structs rather than JSON objects: a review's patch is built and written once.
  struct Operation {
    std::string_view op;  // a literal: "add", "replace", "remove", "test"
    std::string path;
    std::optional<nlohmann::json> value;  // none for remove
  };
  std::vector<Operation> ops_;
};

// Applies an RFC 6902 patch (add, remove, replace, move, copy, test) to a copy of `doc`
// (nlohmann's json::patch). All or nothing: the error says what failed.
Result<nlohmann::json> applyJsonPatch(const nlohmann::json& doc, const nlohmann::json& patch);

}  // namespace gvirtus
