#pragma once

// What the benchmarks read from their environment, and the client they drive the local
// control plane with.

#include <catch2/catch.hpp>
#include <cstdlib>
#include <memory>

#include "common/kube_client.h"
#include "common/kube_config.h"
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

}  // namespace gvirtus::bench
