#pragma once

// The backend autoscaler's cluster without an API server, for its unit tests: candidate
// nodes as GPU feature discovery and the labeler leave them, a fake API that patches them
// as the API server would, backends with a load, pods waiting for room, and a clock.

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/base/json_patch.h"
#include "common/time/time_text.h"
#include "webhook/autoscale/autoscaler.h"

namespace gvirtus::webhook::autoscaler_testing {

using nlohmann::json;
using namespace std::chrono_literals;

inline const SystemTime kStart = *gvirtus::parseRfc3339("2026-11-23T10:00:00Z");

inline json gpuNode(const std::string& name, json labels = json::object(),
                    json annotations = json::object()) {
  labels["gvirtus.io/backend.candidate"] = "true";
  labels["nvidia.com/gpu.present"] = "true";
  if (!labels.contains("gvirtus.io/backend.allowed")) {
    labels["gvirtus.io/backend.allowed"] = "false";
  }
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"uid", "uid-" + name},
            {"resourceVersion", "1"},
            {"labels", labels},
            {"annotations", annotations}}},
          {"status", {{"capacity", {{"nvidia.com/gpu", "1"}}}}}};
}

inline CapacityDemand waitingPod(const std::string& name, SystemTime since,
                                 BackendRequirements requirements = {}) {
  ObjectReference ref;
  ref.apiVersion = "v1";
  ref.kind = "Pod";
  ref.ns = "team-a";
  ref.name = name;
  return {ref, requirements, since};
}

inline Backend backendOn(const std::string& node, int64_t connections, int64_t maxSessions = 4) {
  Backend backend;
  backend.ip = "10.0.0." + std::to_string(node.size());
  backend.port = 9999;
  backend.podNamespace = "gvirtus-system";
  backend.podName = "backend-" + node;
  backend.node = node;
  backend.load = BackendLoad{connections, maxSessions, {{0, 81920, 0, 0, {}, {}}}, std::nullopt};
  return backend;
}

// The cluster as the autoscaler sees it: nodes the fake API patches as the API server
// would (resourceVersion bumped, a failed test refuses the whole patch), pods given each
// backend, Events recorded, and a clock.
struct FakeCluster {
  std::map<std::string, json> nodes;
  std::map<std::string, int64_t> assigned;                  // backend pod name -> pods given it
  std::vector<std::pair<std::string, std::string>> events;  // object name, reason
  int patches = 0;
  SystemTime now = kStart;

  AutoscalerActions actions() {
    AutoscalerActions out;
    out.patchNode = [this](const std::string& name, const JsonPatch& patch) -> Result<json> {
      ++patches;
      auto applied = gvirtus::applyJsonPatch(nodes.at(name), patch.toJson());
      if (!applied) {
        Error error = applied.error();
        error.httpStatus = 422;
        return std::unexpected(error);
      }
      json& node = nodes[name] = *applied;
      node["metadata"]["resourceVersion"] =
          std::to_string(std::stoi(node["metadata"]["resourceVersion"].get<std::string>()) + 1);
      return node;
    };
    out.assignedPods = [this](const Backend& backend) -> Result<int64_t> {
      return assigned[backend.podName];
    };
    out.event = [this](const ObjectReference& object, const std::string& reason,
                       const std::string&) { events.emplace_back(object.name, reason); };
    out.now = [this] { return now; };
    return out;
  }

  std::vector<json> list() const {
    std::vector<json> out;
    for (const auto& [name, node] : nodes) {
      out.push_back(node);
    }
    return out;
  }
  std::string label(const std::string& node) const {
    return nodes.at(node)["metadata"]["labels"].value("gvirtus.io/backend.allowed", "");
  }
  bool annotated(const std::string& node, const std::string& key) const {
    return nodes.at(node)["metadata"]["annotations"].contains(key);
  }
  int count(const std::string& reason) const {
    int n = 0;
    for (const auto& event : events) {
      n += event.second == reason ? 1 : 0;
    }
    return n;
  }
};

inline AutoscaleOptions options(int64_t max = 2) {
  AutoscaleOptions out;
  out.candidates = "gvirtus.io/backend.candidate=true";
  out.max = max;
  out.scaleUpAfter = 30s;
  out.scaleDownAfter = 10min;
  return out;
}

}  // namespace gvirtus::webhook::autoscaler_testing
