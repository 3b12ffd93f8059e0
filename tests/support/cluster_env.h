#pragma once

// The local control plane as integration tests see it: tests/cluster/with-cluster.sh
// exports GVIRTUS_KUBECONFIG, GVIRTUS_CLUSTER_NAME, GVIRTUS_CLUSTER_BIN and KWOK_WORKDIR.
// Without them an integration test fails (it never passes silently).

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/kube/access/config.h"
#include "common/kube/client.h"
#include "support/child_process.h"
#include "support/eventually.h"

namespace gvirtus::testing {

inline std::string requireEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    FAIL(std::string(name) +
         " is not set: run integration tests through tests/cluster/with-cluster.sh "
         "(make integration-test)");
  }
  return value;
}

inline std::string kubeconfigPath() {
  return requireEnv("GVIRTUS_KUBECONFIG");
}
inline std::string clusterName() {
  return requireEnv("GVIRTUS_CLUSTER_NAME");
}
inline std::string clusterBin() {
  return requireEnv("GVIRTUS_CLUSTER_BIN");
}
inline std::string envOr(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}
inline std::string sourceDir() {
  return envOr("GVIRTUS_SOURCE_DIR", GVIRTUS_TEST_SOURCE_DIR);
}
// build/bin, where the four binaries are.
inline std::string binDir() {
  return envOr("GVIRTUS_BIN_DIR", GVIRTUS_TEST_BIN_DIR);
}

inline std::unique_ptr<KubeClient> adminClient() {
  auto config = loadKubeconfigFile(kubeconfigPath());
  REQUIRE(config.has_value());
  KubeClientOptions options;
  options.qps = 200;
  options.burst = 400;
  auto client = KubeClient::create(*config, options);
  REQUIRE(client.has_value());
  return std::move(*client);
}

// kubectl against the test cluster; returns {exit code, output}.
inline std::pair<int, std::string> kubectl(std::vector<std::string> args) {
  args.insert(args.begin(), {clusterBin() + "/kubectl", "--kubeconfig", kubeconfigPath()});
  return runCommand(std::move(args));
}

}  // namespace gvirtus::testing

namespace gvirtus::testing {

// A TCP port free on every address right now, below the kernel's range for clients' own
// ports (so that no test's client connection can take it meanwhile), at random.
int freePort();

// GET http://127.0.0.1:PORT/PATH: the status and the body; {0, ""} when nothing answers.
struct HttpReply {
  int status = 0;
  std::string body;
};
HttpReply httpFetch(int port, const std::string& path);
// The body alone.
std::string httpGet(int port, const std::string& path);

// The value of a sample in Prometheus text (`name` or `name{labels}` exactly), or -1.
double metricValue(const std::string& metricsText, const std::string& sample);

}  // namespace gvirtus::testing
