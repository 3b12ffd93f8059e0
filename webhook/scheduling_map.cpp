#include "webhook/scheduling_map.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "common/json_access.h"
#include "webhook/names.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

std::optional<int64_t> nonNegative(std::string_view text) {
  int64_t value = 0;
  if (text.empty() || text.front() == '-' || text.front() == '+') {
    return std::nullopt;
  }
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

json hostnameRequirement(const std::string& node) {
  return {{"key", kHostnameLabel}, {"operator", "In"}, {"values", json::array({node})}};
}

void addAffinity(const json& pod, const std::string& node, JsonPatch& patch) {
  const json requirement = hostnameRequirement(node);
  const json* terms =
      memberAt(pod, {"spec", "affinity", "nodeAffinity",
                     "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"});
  if (terms == nullptr || !terms->is_array() || terms->empty()) {
    patch.setMapEntry(
        pod, {"spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"},
        "nodeSelectorTerms", json::array({json{{"matchExpressions", json::array({requirement})}}}));
    return;
  }
  for (size_t i = 0; i < terms->size(); ++i) {
    const json* expressions = member((*terms)[i], "matchExpressions");
    const std::string termPath = jsonPointer(
        {"spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
         "nodeSelectorTerms", std::to_string(i), "matchExpressions"});
    // Whole arrays, never "-" appends: the patch applied twice changes nothing more.
    json updated = expressions != nullptr && expressions->is_array() ? *expressions : json::array();
    if (std::find(updated.begin(), updated.end(), requirement) == updated.end()) {
      updated.push_back(requirement);
      patch.add(termPath, updated);
    }
  }
}

void setEnv(const json& containers, const char* field, const std::string& devices,
            JsonPatch& patch) {
  if (!containers.is_array()) {
    return;
  }
  const json entry = {{"name", kCudaVisibleDevicesEnv}, {"value", devices}};
  for (size_t i = 0; i < containers.size(); ++i) {
    const json* env = member(containers[i], "env");
    const std::string envPath = jsonPointer({"spec", field, std::to_string(i), "env"});
    if (env == nullptr || !env->is_array()) {
      patch.add(envPath, json::array({entry}));
      continue;
    }
    bool found = false;
    for (size_t j = 0; j < env->size() && !found; ++j) {
      const json* name = member((*env)[j], "name");
      if (name != nullptr && *name == kCudaVisibleDevicesEnv) {
        found = true;
        if ((*env)[j] != entry) {
          patch.replace(envPath + "/" + std::to_string(j), entry);
        }
      }
    }
    if (!found) {
      json updated = *env;
      updated.push_back(entry);
      patch.add(envPath, updated);
    }
  }
}

}  // namespace

Result<SchedulingMap> parseSchedulingMap(std::string_view text) {
  SchedulingMap entries;
  int lineNumber = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    const std::string_view raw = text.substr(start, end - start);
    start = end + 1;
    ++lineNumber;
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#') {
      continue;
    }
    auto bad = [&](const std::string& why) {
      return fail(std::string(kSchedulingMapAnnotation) + " line " + std::to_string(lineNumber) +
                  " (\"" + std::string(line) + "\"): " + why);
    };
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) {
      return bad("missing '=' (expected INDEX=NODE:DEVICES)");
    }
    const std::string_view indexText = trim(line.substr(0, eq));
    auto index = nonNegative(indexText);
    if (!index) {
      return bad("index \"" + std::string(indexText) + "\" is not a non-negative integer");
    }
    const std::string_view rest = line.substr(eq + 1);
    const auto colon = rest.find(':');
    if (colon == std::string_view::npos) {
      return bad("missing ':' (expected INDEX=NODE:DEVICES)");
    }
    const std::string_view node = trim(rest.substr(0, colon));
    if (node.empty()) {
      return bad("empty node name");
    }
    if (node.find_first_of(" \t") != std::string_view::npos) {
      return bad("node name \"" + std::string(node) + "\" holds whitespace");
    }
    const std::string_view deviceText = trim(rest.substr(colon + 1));
    std::string devices;
    size_t from = 0;
    while (true) {
      const size_t comma = deviceText.find(',', from);
      const std::string_view item = trim(deviceText.substr(
          from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
      if (!nonNegative(item)) {
        return bad("devices \"" + std::string(deviceText) + "\" are not comma-separated integers");
      }
      devices += (devices.empty() ? "" : ",") + std::string(item);
      if (comma == std::string_view::npos) {
        break;
      }
      from = comma + 1;
    }
    if (auto it = entries.find(*index); it != entries.end()) {
      return bad("duplicate index " + std::to_string(*index) + " (first on line " +
                 std::to_string(it->second.line) + ")");
    }
    entries[*index] = SchedulingEntry{*index, std::string(node), devices, lineNumber};
  }
  return entries;
}

std::optional<int64_t> podIndex(const json& pod, const std::string& fallbackName) {
  if (const json* label = memberAt(pod, {"metadata", "labels", kPodIndexLabel});
      label != nullptr && label->is_string()) {
    if (auto index = nonNegative(trim(label->get_ref<const std::string&>()))) {
      return index;
    }
  }
  std::string name = fallbackName;
  if (const json* own = memberAt(pod, {"metadata", "name"});
      own != nullptr && own->is_string() && !own->get_ref<const std::string&>().empty()) {
    name = own->get<std::string>();
  }
  const auto dash = name.rfind('-');
  if (dash == std::string::npos) {
    return std::nullopt;
  }
  return nonNegative(std::string_view(name).substr(dash + 1));
}

JsonPatch schedulingPatch(const json& pod, const SchedulingEntry& entry) {
  JsonPatch patch;
  addAffinity(pod, entry.node, patch);
  if (const json* spec = member(pod, "spec")) {
    if (const json* containers = member(*spec, "containers")) {
      setEnv(*containers, "containers", entry.devices, patch);
    }
    if (const json* containers = member(*spec, "initContainers")) {
      setEnv(*containers, "initContainers", entry.devices, patch);
    }
  }
  return patch;
}

}  // namespace gvirtus::webhook
