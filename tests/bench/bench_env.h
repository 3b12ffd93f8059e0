#pragma once

// What the benchmarks read from their environment, and the client they drive the local
// control plane with.

#include <catch2/catch.hpp>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/base/base64.h"
#include "common/kube/access/config.h"
#include "common/kube/client.h"
#include "support/cluster_env.h"

namespace gvirtus::bench {

// $name as an int; `fallback` when it is unset or empty.
inline int envInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::atoi(value) : fallback;
}

// A client of the local control plane (the test kubeconfig) without a client-side rate
// limit worth the name: the API server is what the benchmarks time. `maxRetries` 0: a
// failed request counts as failed.
inline std::unique_ptr<KubeClient> unthrottledClient(
    int maxRetries = KubeClientOptions{}.maxRetries) {
  auto config = loadKubeconfigFile(gvirtus::testing::kubeconfigPath());
  REQUIRE(config.has_value());
  KubeClientOptions options;
  options.maxRetries = maxRetries;
  options.qps = 100000;
  options.burst = 100000;
  auto client = KubeClient::create(*config, options);
  REQUIRE(client.has_value());
  return std::move(*client);
}

// A MutatingWebhookConfiguration `name` with one webhook: the CREATE of pods in namespace
// `ns` whose labels match `matchLabels` goes to `url` (HTTPS, trusting `caPem`), and a
// failure fails the creation.
inline nlohmann::json podWebhookRegistration(const std::string& name, const std::string& url,
                                             const std::string& caPem, const std::string& ns,
                                             const nlohmann::json& matchLabels) {
  const nlohmann::json hook = {
      {"name", name + ".bench.gvirtus.io"},
      {"clientConfig", {{"url", url}, {"caBundle", base64Encode(caPem)}}},
      {"rules", nlohmann::json::array({{{"apiGroups", {""}},
                                        {"apiVersions", {"v1"}},
                                        {"operations", {"CREATE"}},
                                        {"resources", {"pods"}},
                                        {"scope", "Namespaced"}}})},
      {"namespaceSelector", {{"matchLabels", {{"kubernetes.io/metadata.name", ns}}}}},
      {"objectSelector", {{"matchLabels", matchLabels}}},
      {"admissionReviewVersions", {"v1"}},
      {"sideEffects", "NoneOnDryRun"},
      {"failurePolicy", "Fail"},
      {"reinvocationPolicy", "Never"},
      {"timeoutSeconds", 10}};
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", "MutatingWebhookConfiguration"},
          {"metadata", {{"name", name}}},
          {"webhooks", nlohmann::json::array({hook})}};
}

}  // namespace gvirtus::bench
