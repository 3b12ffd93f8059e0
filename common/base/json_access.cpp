#include "common/base/json_access.h"

namespace gvirtus {

using nlohmann::json;

Result<json> parseJson(std::string_view text) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for 1e400
    return fail(e.what());
  }
}

std::string compactJson(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

const json* member(const json& object, std::string_view key) {
  if (!object.is_object()) {
    return nullptr;
  }
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

const json* memberAt(const json& object, std::initializer_list<std::string_view> path) {
  const json* node = &object;
  for (auto key : path) {
    node = member(*node, key);
    if (node == nullptr) {
      return nullptr;
    }
  }
  return node;
}

std::string stringAt(const json& object, std::initializer_list<std::string_view> path) {
  const json* node = memberAt(object, path);
  return node != nullptr && node->is_string() ? node->get<std::string>() : std::string();
}

std::optional<std::string> optionalStringAt(const json& object,
                                            std::initializer_list<std::string_view> path) {
  const json* node = memberAt(object, path);
  if (node == nullptr || !node->is_string()) {
    return std::nullopt;
  }
  return node->get<std::string>();
}

namespace {

json& valueAt(json& object, std::initializer_list<std::string_view> path, json empty) {
  json* node = &object;
  for (auto key : path) {
    if (!node->is_object()) {
      *node = json::object();
    }
    // Found without building a key; a missing one is added.
    auto it = node->find(key);
    node = it != node->end() ? &*it : &(*node)[std::string(key)];
  }
  if (node->type() != empty.type()) {
    *node = std::move(empty);
  }
  return *node;
}

}  // namespace

json& objectAt(json& object, std::initializer_list<std::string_view> path) {
  return valueAt(object, path, json::object());
}

json& arrayAt(json& object, std::initializer_list<std::string_view> path) {
  return valueAt(object, path, json::array());
}

}  // namespace gvirtus
