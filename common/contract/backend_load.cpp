#include "common/contract/backend_load.h"

#include <charconv>
#include <ctime>
#include <nlohmann/json.hpp>

#include "common/base/json_access.h"
#include "common/time/time_text.h"

namespace gvirtus {
namespace {

using nlohmann::json;

// NVML's own buffers for a name or UUID hold 96 bytes.
constexpr size_t kMaxGpuName = 96;

Result<int64_t> countField(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) {
    return 0;
  }
  if (!it->is_number_integer() && !(it->is_number_float() && it->get<double>() >= 0)) {
    return fail(std::string("\"") + name + "\" is not a number");
  }
  const int64_t value =
      it->is_number_integer() ? it->get<int64_t>() : static_cast<int64_t>(it->get<double>());
  if (value < 0) {
    return fail(std::string("\"") + name + "\" is negative");
  }
  return value;
}

}  // namespace

Result<BackendLoad> parseBackendLoad(std::string_view annotation) {
  auto parsed = parseJson(annotation);
  if (!parsed || !parsed->is_object()) {
    return fail("gvirtus.io/load is not a JSON object");
  }
  const json& doc = *parsed;
  BackendLoad load;
  auto connections = countField(doc, "connections");
  auto maxSessions = countField(doc, "maxSessions");
  if (!connections || !maxSessions) {
    return fail(
        (connections ? maxSessions.error() : connections.error()).context("gvirtus.io/load"));
  }
  load.connections = *connections;
  load.maxSessions = *maxSessions;
  if (auto gpus = doc.find("gpus"); gpus != doc.end() && !gpus->is_null()) {
    if (!gpus->is_array()) {
      return fail("gvirtus.io/load: \"gpus\" is not an array");
    }
    for (const auto& item : *gpus) {
      if (!item.is_object()) {
        return fail("gvirtus.io/load: a GPU is not an object");
      }
      GpuLoad gpu;
      for (auto [name, target] :
           {std::pair{"index", &gpu.index}, std::pair{"memoryTotalMiB", &gpu.memoryTotalMiB},
            std::pair{"memoryUsedMiB", &gpu.memoryUsedMiB},
            std::pair{"utilization", &gpu.utilization}}) {
        auto value = countField(item, name);
        if (!value) {
          return fail(value.error().context("gvirtus.io/load GPU"));
        }
        *target = *value;
      }
      for (auto [name, target] : {std::pair{"uuid", &gpu.uuid}, std::pair{"model", &gpu.model}}) {
        if (auto value = item.find(name); value != item.end() && !value->is_null()) {
          if (!value->is_string() || value->get_ref<const std::string&>().size() > kMaxGpuName) {
            return fail(std::string("gvirtus.io/load GPU: \"") + name +
                        "\" is not a string of at most " + std::to_string(kMaxGpuName) +
                        " characters");
          }
          *target = value->get<std::string>();
        }
      }
      load.gpus.push_back(gpu);
    }
  }
  if (auto updated = doc.find("updated"); updated != doc.end() && !updated->is_null()) {
    if (!updated->is_string()) {
      return fail("gvirtus.io/load: \"updated\" is not a string");
    }
    auto time = parseRfc3339(updated->get<std::string>());
    if (!time) {
      return fail(time.error().context("gvirtus.io/load \"updated\""));
    }
    load.updated = *time;
  }
  return load;
}

std::string renderBackendLoad(const BackendLoad& load) {
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const auto& gpu : load.gpus) {
    nlohmann::ordered_json item = {{"index", gpu.index},
                                   {"memoryTotalMiB", gpu.memoryTotalMiB},
                                   {"memoryUsedMiB", gpu.memoryUsedMiB},
                                   {"utilization", gpu.utilization}};
    if (!gpu.uuid.empty()) {
      item["uuid"] = gpu.uuid;
    }
    if (!gpu.model.empty()) {
      item["model"] = gpu.model;
    }
    gpus.push_back(std::move(item));
  }
  nlohmann::ordered_json out = {
      {"connections", load.connections}, {"maxSessions", load.maxSessions}, {"gpus", gpus}};
  if (load.updated) {
    out["updated"] = formatRfc3339(*load.updated);
  }
  return out.dump();
}

}  // namespace gvirtus
