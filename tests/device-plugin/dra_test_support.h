#pragma once

// Helpers of the DRA driver's tests: a claim source holding a test's claims and slices, and
// the claims and slices as the API server would hold them after kube-scheduler allocated.

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "device-plugin/dra/claim_preparer.h"

namespace gvirtus::device_plugin::test {

// A claim allocated `devices` ({pool, device} each) of gpu.gvirtus.io for request "gpu".
inline nlohmann::json allocatedClaim(
    const std::string& ns, const std::string& name, const std::string& uid,
    const std::vector<std::pair<std::string, std::string>>& devices,
    const std::string& shareId = {}) {
  nlohmann::json results = nlohmann::json::array();
  for (const auto& [pool, device] : devices) {
    nlohmann::json result = {
        {"driver", "gpu.gvirtus.io"}, {"request", "gpu"}, {"pool", pool}, {"device", device}};
    if (!shareId.empty()) {
      result["shareID"] = shareId;
    }
    results.push_back(std::move(result));
  }
  return {{"metadata", {{"namespace", ns}, {"name", name}, {"uid", uid}}},
          {"status", {{"allocation", {{"devices", {{"results", results}}}}}}}};
}

// The slice the webhook publishes for one backend pod: one device gpu-0 at ip:port.
inline nlohmann::json backendSlice(const std::string& pool, const std::string& ip, int port) {
  nlohmann::json device = {{"name", "gpu-0"},
                           {"attributes", {{"ip", {{"string", ip}}}, {"port", {{"int", port}}}}}};
  return {{"metadata", {{"name", "gvirtus-" + pool}}},
          {"spec",
           {{"driver", "gpu.gvirtus.io"},
            {"pool", {{"name", pool}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", nlohmann::json::array({device})}}}};
}

class FakeClaimSource final : public ClaimSource {
 public:
  void putClaim(const nlohmann::json& claim) {
    std::lock_guard lock(mutex_);
    claims_[claim["metadata"]["namespace"].get<std::string>() + "/" +
            claim["metadata"]["name"].get<std::string>()] = claim;
  }
  void setSlices(std::vector<nlohmann::json> slices) {
    std::lock_guard lock(mutex_);
    slices_ = std::move(slices);
  }

  Result<nlohmann::json> claim(const std::string& ns, const std::string& name) override {
    std::lock_guard lock(mutex_);
    auto it = claims_.find(ns + "/" + name);
    if (it == claims_.end()) {
      return fail("resourceclaims \"" + name + "\" not found", 404, "NotFound");
    }
    return it->second;
  }
  Result<std::vector<nlohmann::json>> slices() override {
    sliceLists.fetch_add(1);
    std::lock_guard lock(mutex_);
    return slices_;
  }

  std::atomic<int> sliceLists{0};

 private:
  std::mutex mutex_;
  std::map<std::string, nlohmann::json> claims_;
  std::vector<nlohmann::json> slices_;
};

}  // namespace gvirtus::device_plugin::test
