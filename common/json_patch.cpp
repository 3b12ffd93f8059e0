#include "common/json_patch.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <type_traits>
#include <utility>

#include "common/json_text.h"

namespace gvirtus {
namespace {

using nlohmann::json;

// An array index as RFC 6901 writes it: "0", or digits without a leading zero.
std::optional<std::size_t> parseIndex(std::string_view token) {
  if (token.empty() || token.size() > 18 || (token.size() > 1 && token[0] == '0')) {
    return std::nullopt;
  }
  std::size_t index = 0;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), index);
  if (ec != std::errc() || end != token.data() + token.size()) {
    return std::nullopt;
  }
  return index;
}

// The child of `node` named by `token`; nullptr when there is none. J is json or const json.
template <typename J>
J* child(J& node, const std::string& token) {
  if (node.is_object()) {
    auto it = node.find(token);
    return it == node.end() ? nullptr : &*it;
  }
  if (node.is_array()) {
    auto index = parseIndex(token);
    return index && *index < node.size() ? &node[*index] : nullptr;
  }
  return nullptr;
}

// The value at the first `count` tokens; nullptr when it does not exist.
template <typename J>
J* locate(J& doc, const std::vector<std::string>& tokens, std::size_t count) {
  J* node = &doc;
  for (std::size_t i = 0; i < count && node != nullptr; ++i) {
    node = child(*node, tokens[i]);
  }
  return node;
}

void appendJsonPointerToken(std::string& out, std::string_view token) {
  // A plain loop: find_first_of searches the set for every byte (the diff names every
  // member it walks).
  if (std::none_of(token.begin(), token.end(), [](char c) { return c == '~' || c == '/'; })) {
    out += token;
    return;
  }
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
}

std::string pointerOf(const std::vector<std::string>& tokens, std::size_t count,
                      std::optional<std::string_view> last = std::nullopt) {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    out += '/';
    appendJsonPointerToken(out, tokens[i]);
  }
  if (last) {
    out += '/';
    appendJsonPointerToken(out, *last);
  }
  return out;
}

}  // namespace

std::string escapeJsonPointerToken(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  appendJsonPointerToken(out, token);
  return out;
}

std::string jsonPointer(std::initializer_list<std::string_view> tokens) {
  std::string out;
  for (std::string_view token : tokens) {
    out += '/';
    appendJsonPointerToken(out, token);
  }
  return out;
}

std::string jsonPointer(const std::vector<std::string>& tokens) {
  return pointerOf(tokens, tokens.size());
}

Result<std::vector<std::string>> parseJsonPointer(std::string_view pointer) {
  std::vector<std::string> tokens;
  if (pointer.empty()) {
    return tokens;
  }
  if (pointer.front() != '/') {
    return fail("JSON pointer \"" + std::string(pointer) + "\" does not start with '/'");
  }
  std::string token;
  for (std::size_t i = 1; i < pointer.size(); ++i) {
    const char c = pointer[i];
    if (c == '/') {
      tokens.push_back(std::move(token));
      token.clear();
    } else if (c == '~') {
      const char next = i + 1 < pointer.size() ? pointer[i + 1] : '\0';
      if (next != '0' && next != '1') {
        return fail("JSON pointer \"" + std::string(pointer) +
                    "\" has a '~' not followed by 0 or 1");
      }
      token += next == '0' ? '~' : '/';
      ++i;
    } else {
      token += c;
    }
  }
  tokens.push_back(std::move(token));
  return tokens;
}

JsonPatch& JsonPatch::push(std::string_view op, std::string path, nlohmann::json* value) {
  Operation& entry = ops_.emplace_back(Operation{op, std::move(path), std::nullopt});
  if (value != nullptr) {
    entry.value = std::move(*value);
  }
  return *this;
}

JsonPatch& JsonPatch::add(std::string path, nlohmann::json value) {
  return push("add", std::move(path), &value);
}

JsonPatch& JsonPatch::replace(std::string path, nlohmann::json value) {
  return push("replace", std::move(path), &value);
}

JsonPatch& JsonPatch::remove(std::string path) {
  return push("remove", std::move(path), nullptr);
}

JsonPatch& JsonPatch::test(std::string path, nlohmann::json value) {
  return push("test", std::move(path), &value);
}

JsonPatch& JsonPatch::append(const JsonPatch& other) {
  ops_.insert(ops_.end(), other.ops_.begin(), other.ops_.end());
  return *this;
}

namespace {

// Appends to `patch` what turns `from` into `to` at `path`. `inArray`: the value is an
// array element, which "add" would insert before rather than replace. `path` is one buffer
// for the whole walk: a child's token is appended, and cut off again on the way back.
// `Json` is `const json` (values are copied into the patch) or `json` (`to` is consumed:
// values are moved).
template <typename Json>
void diffInto(JsonPatch& patch, const json& from, Json& to, std::string& path, bool inArray) {
  auto value = [](Json& v) -> decltype(auto) {
    if constexpr (std::is_const_v<Json>) {
      return v;
    } else {
      return std::move(v);
    }
  };
  // Containers are walked, not compared whole first: that would compare every subtree
  // once per level above it.
  auto set = [&] {
    if (inArray || path.empty()) {
      patch.replace(path, value(to));
    } else {
      patch.add(path, value(to));
    }
  };
  if (from.is_object() && to.is_object()) {
    // Both maps are sorted by key: walking them side by side pairs the members without a
    // lookup. First pass: a member that is gone means the object is written whole.
    const auto& before = from.get_ref<const json::object_t&>();
    auto& after = to.template get_ref<
        std::conditional_t<std::is_const_v<Json>, const json::object_t&, json::object_t&>>();
    auto kept = after.begin();
    for (const auto& [key, member] : before) {
      while (kept != after.end() && kept->first < key) {
        ++kept;
      }
      if (kept == after.end() || kept->first != key) {
        set();
        return;
      }
    }
    const std::size_t length = path.size();
    auto previous = before.begin();
    for (auto& [key, member] : after) {
      path += '/';
      appendJsonPointerToken(path, key);
      while (previous != before.end() && previous->first < key) {
        ++previous;
      }
      if (previous == before.end() || previous->first != key) {
        patch.add(path, value(member));
      } else {
        diffInto(patch, previous->second, member, path, false);
      }
      path.resize(length);
    }
    return;
  }
  if (from.is_array() && to.is_array() && from.size() == to.size()) {
    const std::size_t length = path.size();
    for (std::size_t i = 0; i < to.size(); ++i) {
      path += '/';
      path += std::to_string(i);
      diffInto(patch, from[i], to[i], path, true);
      path.resize(length);
    }
    return;
  }
  if (from != to) {
    set();
  }
}

template <typename Json>
JsonPatch diff(const json& from, Json& to) {
  JsonPatch patch;
  std::string path;
  path.reserve(128);
  diffInto(patch, from, to, path, false);
  return patch;
}

}  // namespace

JsonPatch JsonPatch::between(const nlohmann::json& from, const nlohmann::json& to) {
  return diff(from, to);
}

JsonPatch JsonPatch::between(const nlohmann::json& from, nlohmann::json&& to) {
  return diff(from, to);
}

nlohmann::json JsonPatch::current(const nlohmann::json& doc) const {
  if (ops_.empty()) {
    return doc;
  }
  auto applied = applyJsonPatch(doc, toJson());
  return applied ? std::move(*applied) : doc;
}

JsonPatch& JsonPatch::setMapEntry(const nlohmann::json& doc,
                                  const std::vector<std::string>& mapPath, std::string_view key,
                                  nlohmann::json value) {
  const json now = current(doc);
  // Walk down as far as the path exists: objects anywhere, arrays above the map only.
  const json* node = &now;
  std::size_t depth = 0;
  for (; depth < mapPath.size(); ++depth) {
    const json* next = child(*node, mapPath[depth]);
    const bool isMap = depth + 1 == mapPath.size();
    if (next == nullptr || !(next->is_object() || (!isMap && next->is_array()))) {
      break;
    }
    node = next;
  }
  if (depth == mapPath.size() && node->is_object()) {
    auto it = node->find(std::string(key));
    if (it == node->end()) {
      return add(pointerOf(mapPath, mapPath.size(), key), std::move(value));
    }
    if (*it != value) {
      return replace(pointerOf(mapPath, mapPath.size(), key), std::move(value));
    }
    return *this;
  }
  // Missing from mapPath[depth] on (or not an object there): add it whole, nested.
  json nested = json::object();
  nested[std::string(key)] = std::move(value);
  for (std::size_t i = mapPath.size(); i > depth + 1; --i) {
    json outer = json::object();
    outer[mapPath[i - 1]] = std::move(nested);
    nested = std::move(outer);
  }
  const std::size_t count = depth == mapPath.size() ? depth : depth + 1;
  return add(pointerOf(mapPath, count), std::move(nested));
}

JsonPatch& JsonPatch::removeMapEntry(const nlohmann::json& doc,
                                     const std::vector<std::string>& mapPath,
                                     std::string_view key) {
  const json now = current(doc);
  const json* map = locate(now, mapPath, mapPath.size());
  if (map != nullptr && map->is_object() && map->contains(std::string(key))) {
    remove(pointerOf(mapPath, mapPath.size(), key));
  }
  return *this;
}

nlohmann::json JsonPatch::toJson() const {
  json ops = json::array();
  for (const auto& entry : ops_) {
    json op = {{"op", entry.op}, {"path", entry.path}};
    if (entry.value) {
      op["value"] = *entry.value;
    }
    ops.push_back(std::move(op));
  }
  return ops;
}

std::string JsonPatch::dump() const {
  // Members in key order ("op", "path", "value"), as toJson().dump() writes them.
  std::string out;
  out.reserve(128 * ops_.size());  // about one operation's text each: one allocation or two
  out += '[';
  for (const auto& entry : ops_) {
    out += out.size() == 1 ? R"({"op":")" : R"(,{"op":")";
    out += entry.op;
    out += R"(","path":)";
    appendJsonString(out, entry.path);
    if (entry.value) {
      out += R"(,"value":)";
      appendCompactJson(out, *entry.value);
    }
    out += '}';
  }
  out += ']';
  return out;
}

Result<nlohmann::json> applyJsonPatch(const nlohmann::json& doc, const nlohmann::json& patch) {
  // nlohmann's RFC 6902 implementation, on a copy; its exceptions become errors.
  try {
    return doc.patch(patch);
  } catch (const nlohmann::json::exception& e) {
    return fail(std::string("JSON patch: ") + e.what());
  }
}

}  // namespace gvirtus
