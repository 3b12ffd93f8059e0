#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/base/error.h"

// Reading Kubernetes objects that may lack any field: a missing member, or a value of
// another type, reads as absent instead of throwing. Writing makes what is missing.
namespace gvirtus {

// The one way text becomes JSON: nlohmann's parser (non-recursive, so deep nesting costs
// heap, not stack), its exceptions (bad syntax, a number too large for a double) turned
// into an error that names where the text went wrong.
Result<nlohmann::json> parseJson(std::string_view text);
// Compact JSON text; invalid UTF-8 (a tenant's string) is replaced, never thrown on.
std::string compactJson(const nlohmann::json& value);

// The member `key` of `object`; null when `object` is no object or has no such member.
const nlohmann::json* member(const nlohmann::json& object, std::string_view key);

// The value at a path of members ({"metadata", "labels", "app"}); null where it breaks.
const nlohmann::json* memberAt(const nlohmann::json& object,
                               std::initializer_list<std::string_view> path);

// The string at a path of members; empty where the path breaks or the value is no string.
std::string stringAt(const nlohmann::json& object, std::initializer_list<std::string_view> path);
// The same, telling an absent value (or one that is no string) from an empty one: nullopt.
std::optional<std::string> optionalStringAt(const nlohmann::json& object,
                                            std::initializer_list<std::string_view> path);

// For writing: the object (or array) at a path of members, made where it is missing and
// put in place of a value of another type, as are the objects above it.
nlohmann::json& objectAt(nlohmann::json& object, std::initializer_list<std::string_view> path);
nlohmann::json& arrayAt(nlohmann::json& object, std::initializer_list<std::string_view> path);

}  // namespace gvirtus
