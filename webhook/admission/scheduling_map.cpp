#include "webhook/admission/scheduling_map.h"

#include <algorithm>
#include <vector>

#include "common/base/json_access.h"
#include "common/base/strings.h"
#include "webhook/base/names.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

json hostnameRequirement(const std::string& node) {
  return {{"key", kHostnameLabel}, {"operator", "In"}, {"values", json::array({node})}};
}

void addAffinity(json& pod, const std::string& node) {
  const json requirement = hostnameRequirement(node);
  json& terms =
      arrayAt(pod, {"spec", "affinity", "nodeAffinity",
                    "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"});
  if (terms.empty()) {
    terms.push_back({{"matchExpressions", json::array({requirement})}});
    return;
  }
  for (auto& term : terms) {
    json& expressions = arrayAt(term, {"matchExpressions"});
    if (std::find(expressions.begin(), expressions.end(), requirement) == expressions.end()) {
      expressions.push_back(requirement);
    }
  }
}

void setEnv(json& containers, const std::string& devices) {
  if (!containers.is_array()) {
    return;
  }
  const json entry = {{"name", kCudaVisibleDevicesEnv}, {"value", devices}};
  for (auto& container : containers) {
    json& env = arrayAt(container, {"env"});
    auto named = std::find_if(env.begin(), env.end(), [](const json& item) {
      const json* name = member(item, "name");
      return name != nullptr && *name == kCudaVisibleDevicesEnv;
    });
    if (named == env.end()) {
      env.push_back(entry);
    } else {
      *named = entry;
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
    auto index = parseNonNegative(indexText);
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
      if (!parseNonNegative(item)) {
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
    if (auto index = parseNonNegative(trim(label->get_ref<const std::string&>()))) {
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
  return parseNonNegative(std::string_view(name).substr(dash + 1));
}

void applySchedulingEntry(json& pod, const SchedulingEntry& entry) {
  addAffinity(pod, entry.node);
  json& spec = pod["spec"];  // an object now
  for (const char* field : {"containers", "initContainers"}) {
    if (spec.contains(field)) {
      setEnv(spec[field], entry.devices);
    }
  }
}

}  // namespace gvirtus::webhook
