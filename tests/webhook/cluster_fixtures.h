#pragma once

// Pieces of the webhook's integration tests on the real control plane: kwok nodes, backend
// pods with a load report, and the webhook as a host process registered by a
// MutatingWebhookConfiguration with clientConfig.url https://127.0.0.1:PORT/mutate.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <ctime>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/base/base64.h"
#include "common/kube/client.h"
#include "integration/fixtures.h"
#include "support/cluster_env.h"
#include "webhook/webhook_process.h"

namespace gvirtus::webhook::testing {

using gvirtus::integration::randomSuffix;
using gvirtus::integration::TestNamespace;
using gvirtus::testing::eventually;
using gvirtus::testing::kubeconfigPath;
using nlohmann::json;
using namespace std::chrono_literals;

inline std::string utcNow() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// A kwok node (kwok manages every node of the test cluster): created when missing, its
// labels merged in when it exists.
inline void ensureNode(KubeClient& client, const std::string& name, json labels,
                       json extraCapacity = json::object()) {
  labels["kubernetes.io/hostname"] = name;
  json capacity = {{"cpu", "16"}, {"memory", "64Gi"}, {"pods", "110"}};
  capacity.update(extraCapacity);
  const json node = {{"apiVersion", "v1"},
                     {"kind", "Node"},
                     {"metadata", {{"name", name}, {"labels", labels}}},
                     {"status", {{"capacity", capacity}, {"allocatable", capacity}}}};
  auto created = client.create(resources::kNodes, "", node);
  if (!created) {
    INFO(created.error().message);
    REQUIRE(created.error().isConflict());
    auto patched = client.patch(resources::kNodes, "", name, PatchType::Merge,
                                json{{"metadata", {{"labels", labels}}}}.dump());
    INFO((patched ? "" : patched.error().message));
    REQUIRE(patched.has_value());
  }
}

// True while the pod carries the waiting-pod gate gvirtus.io/backend.
inline bool gated(const json& pod) {
  for (const auto& gate : pod["spec"].value("schedulingGates", json::array())) {
    if (gate.value("name", "") == "gvirtus.io/backend") {
      return true;
    }
  }
  return false;
}

inline void ensureNamespace(KubeClient& client, const std::string& name) {
  auto created =
      client.create(resources::kNamespaces, "",
                    {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  if (!created) {
    INFO(created.error().message);
    REQUIRE(created.error().isConflict());
  }
  REQUIRE(eventually(
      [&] { return client.get(resources::kServiceAccounts, name, "default").has_value(); }));
}

inline json podStatus(KubeClient& client, const std::string& ns, const std::string& name) {
  auto pod = client.get(resources::kPods, ns, name);
  return pod && (*pod)["status"].is_object() ? (*pod)["status"] : json::object();
}

inline bool podRunning(KubeClient& client, const std::string& ns, const std::string& name) {
  return podStatus(client, ns, name).value("phase", "") == "Running";
}

// A backend pod in `ns`, bound to `node` (kwok marks it Running and Ready with an IP), with
// the backend shim's load report.
inline json backendPod(const std::string& ns, const std::string& name, const std::string& node,
                       const std::string& runLabel, int connections, int maxSessions) {
  const json load = {{"connections", connections},
                     {"maxSessions", maxSessions},
                     {"gpus", json::array({{{"index", 0},
                                            {"memoryTotalMiB", 81920},
                                            {"memoryUsedMiB", 1024},
                                            {"utilization", 5}}})},
                     {"updated", utcNow()}};
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", ns},
        {"labels", {{"app.kubernetes.io/component", "backend"}, {"gvirtus.io/test-run", runLabel}}},
        {"annotations", {{"gvirtus.io/load", load.dump()}}}}},
      {"spec",
       {{"nodeName", node},
        {"containers", json::array({{{"name", "backend"}, {"image", "gvirtus/backend"}}})}}}};
}

// The two webhook entries of the manifest (GVirtuS pods by label, gpu-scheduling-map pods by
// a matchCondition), both calling POST /mutate on the host process.
inline json webhookConfiguration(const std::string& name, int port, const std::string& caPem,
                                 const std::vector<std::string>& excludedNamespaces) {
  const json clientConfig = {{"url", "https://127.0.0.1:" + std::to_string(port) + "/mutate"},
                             {"caBundle", base64Encode(caPem)}};
  const json rules = json::array({{{"apiGroups", {""}},
                                   {"apiVersions", {"v1"}},
                                   {"operations", {"CREATE"}},
                                   {"resources", {"pods"}},
                                   {"scope", "Namespaced"}}});
  const json namespaceSelector = {
      {"matchExpressions", json::array({{{"key", "kubernetes.io/metadata.name"},
                                         {"operator", "NotIn"},
                                         {"values", excludedNamespaces}}})}};
  json common = {{"clientConfig", clientConfig},           {"rules", rules},
                 {"namespaceSelector", namespaceSelector}, {"admissionReviewVersions", {"v1"}},
                 {"sideEffects", "NoneOnDryRun"},          {"failurePolicy", "Fail"},
                 {"reinvocationPolicy", "IfNeeded"},       {"timeoutSeconds", 10}};
  json pods = common;
  pods["name"] = "pods.gvirtus.io";
  pods["objectSelector"] = {{"matchLabels", {{"gvirtus.io/enabled", "true"}}}};
  json map = common;
  map["name"] = "scheduling-map.gvirtus.io";
  map["matchConditions"] = json::array({{{"name", "has-gpu-scheduling-map"},
                                         {"expression",
                                          "has(object.metadata.annotations) && "
                                          "'gpu-scheduling-map' in object.metadata.annotations"}}});
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", "MutatingWebhookConfiguration"},
          {"metadata", {{"name", name}, {"labels", {{"gvirtus.io/test", "integration"}}}}},
          {"webhooks", json::array({pods, map})}};
}

// The namespaces a registration leaves out unless told otherwise.
inline const std::vector<std::string> kExcludedNamespaces = {"kube-system", "gvirtus-system"};

// The webhook process and its registration; the registration is deleted first at the end,
// so that no pod creation of later tests reaches a webhook that is gone.
class RegisteredWebhook {
 public:
  RegisteredWebhook(KubeClient& client, std::vector<std::string> args,
                    std::vector<std::string> excludedNamespaces = kExcludedNamespaces)
      : client_(client), tls_(dir_) {
    std::vector<std::string> all = {"--kubeconfig", kubeconfigPath(), "--tls-cert-file",
                                    tls_.certFile,  "--tls-key-file", tls_.keyFile};
    all.insert(all.end(), args.begin(), args.end());
    process_ = std::make_unique<WebhookProcess>(all);
    INFO(process_->child().output());
    REQUIRE(eventually(
        [&] {
          return gvirtus::testing::httpGet(process_->healthPort(), "/readyz").starts_with("ok");
        },
        30s));
    name_ = "gvirtus-webhook-it-" + randomSuffix();
    auto created = client_.create(
        resources::kMutatingWebhookConfigurations, "",
        webhookConfiguration(name_, process_->port(), tls_.ca.certPem, excludedNamespaces));
    INFO((created ? "" : created.error().message));
    REQUIRE(created.has_value());
  }
  ~RegisteredWebhook() {
    (void)client_.remove(resources::kMutatingWebhookConfigurations, "", name_);
    // The API server drops the registration from its webhook informer a moment later; until
    // then a GVirtuS pod's creation still reaches this process. A dry-run creation that does
    // not reach it shows the registration gone.
    (void)eventually([&] { return !reachesThisWebhook(); }, 10s);
  }

  WebhookProcess& process() { return *process_; }
  const TlsFiles& tls() const { return tls_; }
  const std::string& name() const { return name_; }

 private:
  double reviewsAnswered() const {
    return process_->metric("gvirtus_webhook_review_duration_seconds_count");
  }
  bool reachesThisWebhook() {
    const double before = reviewsAnswered();
    const json probe = {{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata",
                         {{"generateName", "registration-probe-"},
                          {"namespace", "default"},
                          {"labels", {{"gvirtus.io/enabled", "true"}}}}},
                        {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "x"}}})}}}};
    WriteOptions dryRun;
    dryRun.dryRun = true;
    (void)client_.create(resources::kPods, "default", probe, dryRun);
    return reviewsAnswered() != before;
  }

  KubeClient& client_;
  TempDir dir_;
  TlsFiles tls_;
  std::unique_ptr<WebhookProcess> process_;
  std::string name_;
};

// Two replicas with --leader-elect contending for the Lease gvirtus-webhook in `leaseNs`:
// the first registered (it serves the admissions), the second only contending.
class ElectedWebhooks {
 public:
  ElectedWebhooks(KubeClient& client, const std::string& leaseNs, std::vector<std::string> args,
                  std::vector<std::string> excludedNamespaces = kExcludedNamespaces)
      : client_(client), leaseNs_(leaseNs) {
    const std::vector<std::string> election = {"--leader-elect",
                                               "--leader-elect-lease-duration",
                                               "4s",
                                               "--leader-elect-renew-deadline",
                                               "3s",
                                               "--leader-elect-retry-period",
                                               "500ms"};
    args.insert(args.end(), election.begin(), election.end());
    first_ = std::make_unique<RegisteredWebhook>(client, args, std::move(excludedNamespaces));
    std::vector<std::string> second = {"--kubeconfig",    kubeconfigPath(),
                                       "--tls-cert-file", first_->tls().certFile,
                                       "--tls-key-file",  first_->tls().keyFile};
    second.insert(second.end(), args.begin(), args.end());
    second_ = std::make_unique<WebhookProcess>(second);
    secondArgs_ = std::move(second);
    char host[256] = {};
    REQUIRE(gethostname(host, sizeof host - 1) == 0);
    byIdentity_ = {
        {std::string(host) + "_" + std::to_string(first_->process().child().pid()),
         &first_->process()},
        {std::string(host) + "_" + std::to_string(second_->child().pid()), second_.get()}};
  }

  // The identity in the Lease now; empty when there is none.
  std::string holder() {
    auto lease = client_.get(resources::kLeases, leaseNs_, "gvirtus-webhook");
    return lease ? (*lease)["spec"].value("holderIdentity", "") : std::string();
  }
  // Waits until one of the two holds the Lease; its identity.
  std::string waitForLeader() {
    REQUIRE(eventually([&] { return byIdentity_.contains(holder()); }, 30s));
    return holder();
  }
  std::string other(const std::string& identity) const {
    for (const auto& [name, process] : byIdentity_) {
      if (name != identity) {
        return name;
      }
    }
    return {};
  }
  WebhookProcess& process(const std::string& identity) { return *byIdentity_.at(identity); }
  // The replica the registration names: the one the API server sends reviews to.
  WebhookProcess& registered() { return first_->process(); }
  const std::string& caFile() const { return first_->tls().caFile; }
  // One more replica with the same flags, contending too (not in identities()).
  std::unique_ptr<WebhookProcess> startAnother() const {
    return std::make_unique<WebhookProcess>(secondArgs_);
  }
  // Kills the replica with this identity without giving up its Lease.
  void kill(const std::string& identity) {
    byIdentity_.at(identity)->child().kill(SIGKILL);
    REQUIRE(byIdentity_.at(identity)->child().wait(5s).has_value());
  }

 private:
  KubeClient& client_;
  std::string leaseNs_;
  std::unique_ptr<RegisteredWebhook> first_;
  std::unique_ptr<WebhookProcess> second_;
  std::vector<std::string> secondArgs_;
  std::map<std::string, WebhookProcess*> byIdentity_;
};

}  // namespace gvirtus::webhook::testing
