#pragma once

// Pods, AdmissionReviews and a fixed backend source for the webhook's unit tests.

#include <catch2/catch.hpp>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/base/base64.h"
#include "common/base/json_patch.h"
#include "webhook/placement/source.h"

namespace gvirtus::webhook::testing {

using nlohmann::json;

// A pod as the API server hands it to a mutating webhook on CREATE (defaults applied).
inline json gvirtusPod(std::vector<std::string> containers = {"app"}) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", "trainer"},
                {"namespace", "default"},
                {"labels", {{"gvirtus.io/enabled", "true"}}}}},
              {"spec",
               {{"schedulerName", "default-scheduler"},
                {"restartPolicy", "Always"},
                {"containers", json::array()}}}};
  for (const auto& name : containers) {
    pod["spec"]["containers"].push_back({{"name", name},
                                         {"image", "example/" + name},
                                         {"command", {"python", "train.py"}},
                                         {"resources", json::object()}});
  }
  return pod;
}

inline json admissionReview(const json& object, const std::string& uid = "uid-1",
                            const std::string& operation = "CREATE", bool dryRun = false) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", uid},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
            {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
            {"operation", operation},
            {"namespace", object["metadata"].value("namespace", "default")},
            {"name", object["metadata"].value("name", "")},
            {"dryRun", dryRun},
            {"object", object}}}};
}

// The decoded JSON patch of an AdmissionReview answer (an empty array when none).
inline json patchOf(const json& review) {
  const json& response = review.at("response");
  if (!response.contains("patch")) {
    return json::array();
  }
  REQUIRE(response.at("patchType") == "JSONPatch");
  auto decoded = base64Decode(response.at("patch").get<std::string>());
  REQUIRE(decoded.has_value());
  return json::parse(*decoded);
}

// The pod as the API server would leave it: the patch applied by an applier that is not
// ours (nlohmann's RFC 6902 json::patch).
inline json applied(const json& doc, const json& patch) {
  INFO(patch.dump());
  auto result = applyJsonPatch(doc, patch);
  REQUIRE(result.has_value());
  return *result;
}

// The env entry `name` of a container; null when it has none.
inline json envEntry(const json& container, const std::string& name) {
  for (const auto& e : container.value("env", json::array())) {
    if (e.value("name", "") == name) {
      return e;
    }
  }
  return nullptr;
}

// True when the container mounts gvirtus-config read-only at /etc/gvirtus.
inline bool mountsConfig(const json& container) {
  for (const auto& m : container.value("volumeMounts", json::array())) {
    if (m.value("name", "") == "gvirtus-config" && m.value("mountPath", "") == "/etc/gvirtus" &&
        m.value("readOnly", false)) {
      return true;
    }
  }
  return false;
}

inline Backend backend(const std::string& ip, int64_t connections = 0, int64_t maxSessions = 0,
                       const std::string& name = {}, const std::string& zone = {}) {
  Backend b;
  b.ip = ip;
  b.port = 9999;
  b.podNamespace = name.empty() ? "" : "gvirtus-system";
  b.podName = name;
  b.node = name.empty() ? "" : "gpu-" + name;
  b.zone = zone;
  BackendLoad load;
  load.connections = connections;
  load.maxSessions = maxSessions;
  load.gpus = {GpuLoad{0, 81920, 1024, 10, {}, {}}};
  load.updated = std::chrono::system_clock::now();
  b.load = load;
  return b;
}

class FakeBackendSource : public BackendSource {
 public:
  explicit FakeBackendSource(std::vector<Backend> backends = {})
      : backends_(std::make_shared<const std::vector<Backend>>(std::move(backends))) {}
  void setOnChange(std::function<void()>) override {}
  void start() override {}
  void stop() override {}
  bool ready() const override { return true; }
  // A snapshot made once per set(), as the cluster source makes one per change.
  BackendSnapshot backends() const override {
    std::lock_guard lock(mutex_);
    return backends_;
  }
  void set(std::vector<Backend> backends) {
    std::lock_guard lock(mutex_);
    backends_ = std::make_shared<const std::vector<Backend>>(std::move(backends));
  }

 private:
  mutable std::mutex mutex_;
  BackendSnapshot backends_;
};

}  // namespace gvirtus::webhook::testing
