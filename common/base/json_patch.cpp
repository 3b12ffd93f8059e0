#include "common/base/json_patch.h"

#include <algorithm>
#include <optional>
#include <type_traits>
#include <utility>

#include "common/base/json_access.h"

namespace gvirtus {
namespace {

using nlohmann::json;

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
  std::string out;
  for (const std::string& token : tokens) {
    out += '/';
    appendJsonPointerToken(out, token);
  }
  return out;
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
    out += compactJson(entry.path);
    if (entry.value) {
      out += R"(,"value":)";
      out += compactJson(*entry.value);
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
