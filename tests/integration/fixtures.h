#pragma once

// Pieces shared by the integration tests of the common library, on top of
// tests/support/cluster_env.h (the cluster from the environment, eventually(), child
// processes): a namespace per test, ConfigMap objects, random names.

#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/kube/access/config.h"
#include "common/kube/api/resource.h"
#include "common/kube/client.h"
#include "support/cluster_env.h"

namespace gvirtus::integration {

using nlohmann::json;
using testing::adminClient;
using testing::eventually;
using testing::kubeconfigPath;
using namespace std::chrono_literals;

// TLS writes to a socket the peer closed raise SIGPIPE (OpenSSL writes without
// MSG_NOSIGNAL); the binaries ignore it (ShutdownSignal::install), so the tests do too.
inline const bool kSigpipeIgnored = [] {
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}();

// An admin client with a short request timeout and no retries of its own, for tests that
// poll (eventually) while the API server restarts.
inline std::unique_ptr<KubeClient> impatientClient(Duration requestTimeout = 5s) {
  auto config = loadKubeconfigFile(kubeconfigPath());
  REQUIRE(config.has_value());
  KubeClientOptions options;
  options.qps = 200;
  options.burst = 400;
  options.requestTimeout = requestTimeout;
  options.maxRetries = 0;
  auto client = KubeClient::create(*config, options);
  REQUIRE(client.has_value());
  return std::move(*client);
}

inline std::string randomSuffix() {
  static std::mt19937_64 random(std::random_device{}());
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  const char* digits = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string out;
  for (int i = 0; i < 6; ++i) {
    out += digits[random() % 36];
  }
  return out;
}

// A namespace for one test, deleted at the end (the deletion finishes in the background).
class TestNamespace {
 public:
  TestNamespace(KubeClient& client, const std::string& prefix) : client_(client) {
    name_ = prefix + "-" + randomSuffix();
    json ns = {{"apiVersion", "v1"},
               {"kind", "Namespace"},
               {"metadata", {{"name", name_}, {"labels", {{"gvirtus.io/test", "integration"}}}}}};
    auto created = client_.create(resources::kNamespaces, "", ns);
    INFO("creating namespace " << name_ << ": "
                               << (created ? std::string("ok") : created.error().message));
    REQUIRE(created.has_value());
  }
  ~TestNamespace() { (void)client_.remove(resources::kNamespaces, "", name_); }
  TestNamespace(const TestNamespace&) = delete;
  TestNamespace& operator=(const TestNamespace&) = delete;

  const std::string& name() const { return name_; }

  // The ServiceAccount admission plugin rejects pods until `default` exists.
  void waitForDefaultServiceAccount() {
    REQUIRE(eventually(
        [&] { return client_.get(resources::kServiceAccounts, name_, "default").has_value(); }));
  }

 private:
  KubeClient& client_;
  std::string name_;
};

inline json configMap(const std::string& ns, const std::string& name, const json& data,
                      const json& labels = json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
          {"data", data}};
}

// Creates `count` labelled ConfigMaps PREFIX000, PREFIX001, ... with four writers at once
// (one at a time, 120 take about 5s on two cores).
inline void createConfigMaps(KubeClient& client, const std::string& ns, const std::string& prefix,
                             int count, const json& labels) {
  std::atomic<int> next = 0;
  std::atomic<int> failures = 0;
  std::string firstError;
  std::mutex mutex;
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&] {
      for (int i = next++; i < count; i = next++) {
        char suffix[16];
        std::snprintf(suffix, sizeof(suffix), "%03d", i);
        auto created =
            client.create(resources::kConfigMaps, ns,
                          configMap(ns, prefix + suffix, {{"index", std::to_string(i)}}, labels));
        if (!created) {
          ++failures;
          std::lock_guard lock(mutex);
          firstError = created.error().message;
        }
      }
    });
  }
  for (auto& w : writers) {
    w.join();
  }
  INFO(firstError);
  REQUIRE(failures == 0);
}

inline std::string resourceVersionOf(const json& object) {
  return object["metadata"].value("resourceVersion", "");
}

// True when `output` holds `line` as a whole line.
inline bool hasLine(const std::string& output, const std::string& line) {
  size_t at = 0;
  while ((at = output.find(line, at)) != std::string::npos) {
    const bool starts = at == 0 || output[at - 1] == '\n';
    const size_t end = at + line.size();
    if (starts && (end == output.size() || output[end] == '\n')) {
      return true;
    }
    at = end;
  }
  return false;
}

}  // namespace gvirtus::integration
