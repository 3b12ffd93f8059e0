#pragma once

// The backend pods the shim sees, on the one fake API server (support/fake_api_server.h):
// the shim's own pod and the other backend pods a test adds, each with the backend's
// labels, an IP and a Ready condition. The shim's tests point its --kubeconfig at it to run
// the peer check and the leak restart's look at the other backends without a cluster; the
// real API server is tests/backend-shim's integration test's.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "support/fake_api_server.h"

namespace gvirtus::backend_shim::test {

class FakePodApi {
 public:
  using json = nlohmann::json;

  FakePodApi(std::string ns, std::string name) : ns_(std::move(ns)), name_(std::move(name)) {
    server_.put("pods", backendPod(name_, "backend", true));
  }

  // Sets gvirtus.io/peers of the shim's pod (nullopt: removes it); open watches get the pod.
  void setPeers(const std::optional<std::string>& peers) {
    server_.update("pods", ns_, name_, [&](json& pod) {
      auto& annotations = pod["metadata"]["annotations"];
      if (peers) {
        annotations["gvirtus.io/peers"] = *peers;
      } else {
        annotations.erase("gvirtus.io/peers");
      }
    });
  }

  // Another pod with an IP, Ready or not: a backend's labels, or another component's.
  void addPod(const std::string& name, bool ready, const std::string& component = "backend") {
    server_.put("pods", backendPod(name, component, ready));
  }
  // What the kubelet writes when a pod's readiness probe changes its mind.
  void setReady(const std::string& name, bool ready) {
    server_.update("pods", ns_, name, [&](json& pod) {
      pod["status"]["conditions"][0]["status"] = ready ? "True" : "False";
    });
  }

  // A kubeconfig for this server, written to `path`.
  void writeKubeconfig(const std::string& path) const { server_.writeKubeconfig(path); }

 private:
  json backendPod(const std::string& name, const std::string& component, bool ready) {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata",
             {{"name", name},
              {"namespace", ns_},
              {"labels",
               {{"app.kubernetes.io/name", "gvirtus-backend"},
                {"app.kubernetes.io/component", component}}},
              {"annotations", json::object()}}},
            {"status",
             {{"podIP", "10.0.0." + std::to_string(++pods_)},
              {"conditions",
               json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"}}})}}}};
  }

  std::string ns_;
  std::string name_;  // the shim's own pod
  int pods_ = 0;
  testing::FakeApiServer server_;
};

}  // namespace gvirtus::backend_shim::test
