// Least-connections spread with two webhook replicas, on the real control plane: 4 backend
// pods (bound to a kwok node, which makes them Ready with an IP; load reports with no
// session yet and no limit), two gvirtus-webhook processes on the host, and 200 GVirtuS
// pods created through the API server by 8 concurrent clients. Each replica has its own
// registration, which selects its pods by the label bench.gvirtus.io/replica, and each pod
// goes to one replica or the other by a fair coin (a fixed seed): a Service in front of a
// two-replica Deployment does not split reviews into equal halves either. The figure is
// the spread of the assignments: the busiest backend's pods less the least busy one's (the
// goal: at most 1). Neither replica sees the other's choices except through the API
// server (the pods it watches), which is what a Deployment's replicas have.
//
//   tests/cluster/with-cluster.sh bench-spread build/tests/spread_bench
//   (BENCH_SPREAD_PODS, default 200; BENCH_SPREAD_CLIENTS, default 8; BENCH_SPREAD_SEED,
//   default 1)

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_env.h"
#include "bench/bench_output.h"
#include "common/base/json_access.h"
#include "common/kube/access/config.h"
#include "common/kube/client.h"
#include "support/cluster_env.h"
#include "webhook/cluster_fixtures.h"
#include "webhook/webhook_process.h"

using namespace gvirtus;
using namespace gvirtus::bench;
using gvirtus::testing::eventually;
using gvirtus::testing::httpGet;
using gvirtus::testing::metricValue;
using gvirtus::webhook::testing::TempDir;
using gvirtus::webhook::testing::TlsFiles;
using gvirtus::webhook::testing::WebhookProcess;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr const char* kNamespace = "bench-spread";
constexpr const char* kBackendNamespace = "bench-spread-backends";
constexpr const char* kWebhookNamespace = "bench-spread-system";  // their Lease
constexpr const char* kReplicaLabel = "bench.gvirtus.io/replica";
constexpr const char* kRunLabel = "bench.gvirtus.io/run";
constexpr const char* kHoldGate = "bench.gvirtus.io/hold";
const std::vector<std::string> kReplicas = {"a", "b"};

json gvirtusPod(const std::string& name, const std::string& replica) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", kNamespace},
            {"labels", {{"gvirtus.io/enabled", "true"}, {kReplicaLabel, replica}}}}},
          {"spec",
           {{"schedulingGates", json::array({{{"name", kHoldGate}}})},
            {"containers", json::array({{{"name", "app"},
                                         {"image", "example/app"},
                                         {"command", {"python", "train.py"}}}})}}}};
}

std::string backendOf(const json& pod) {
  return stringAt(pod, {"metadata", "annotations", "gvirtus.io/backend"});
}

}  // namespace

TEST_CASE("least-connections spread with two webhook replicas", "[bench]") {
  const int pods = envInt("BENCH_SPREAD_PODS", 200);
  const int clients = envInt("BENCH_SPREAD_CLIENTS", 8);
  constexpr int kBackends = 4;
  const std::string section = "5";
  auto client = unthrottledClient(/*maxRetries=*/0);
  gvirtus::webhook::testing::ensureNamespace(*client, kNamespace);
  gvirtus::webhook::testing::ensureNamespace(*client, kBackendNamespace);
  gvirtus::webhook::testing::ensureNamespace(*client, kWebhookNamespace);
  (void)client->remove(resources::kLeases, kWebhookNamespace, "gvirtus-webhook");
  gvirtus::webhook::testing::ensureNode(*client, "bench-spread-gpu",
                                        {{"gvirtus.io/backend.allowed", "true"}});
  for (int b = 0; b < kBackends; ++b) {
    json pod = gvirtus::webhook::testing::backendPod(
        kBackendNamespace, "backend-" + std::to_string(b), "bench-spread-gpu", "spread", 0, 0);
    pod["metadata"]["labels"][kRunLabel] = "spread-backend";
    auto created = client->create(resources::kPods, kBackendNamespace, pod);
    INFO((created ? "" : created.error().message));
    REQUIRE(created.has_value());
  }

  TempDir dir;
  TlsFiles tls(dir);
  const std::vector<std::string> args = {
      "--kubeconfig", gvirtus::testing::kubeconfigPath(), "--tls-cert-file", tls.certFile,
      "--tls-key-file", tls.keyFile, "--backend-namespace", kBackendNamespace, "--backend-selector",
      std::string(kRunLabel) + "=spread-backend", "--policy", "least-connections",
      // As the Deployment runs them: one leads.
      "--leader-elect", "--namespace", kWebhookNamespace};
  std::map<std::string, std::unique_ptr<WebhookProcess>> replicas;
  for (const auto& replica : kReplicas) {
    replicas[replica] = std::make_unique<WebhookProcess>(args);
  }
  for (const auto& [replica, process] : replicas) {
    INFO("replica " << replica << " sees the " << kBackends << " backends\n"
                    << process->child().output());
    REQUIRE(eventually(
        [&] {
          return metricValue(httpGet(process->healthPort(), "/metrics"),
                             "gvirtus_webhook_backends_available") == kBackends;
        },
        60s));
    (void)client->remove(resources::kMutatingWebhookConfigurations, "", "bench-spread-" + replica);
    auto created = client->create(
        resources::kMutatingWebhookConfigurations, "",
        podWebhookRegistration("bench-spread-" + replica,
                               "https://127.0.0.1:" + std::to_string(process->port()) + "/mutate",
                               tls.ca.certPem, kNamespace,
                               {{"gvirtus.io/enabled", "true"}, {kReplicaLabel, replica}}));
    INFO((created ? "" : created.error().message));
    REQUIRE(created.has_value());
  }
  std::string leader;
  REQUIRE(eventually(
      [&] {
        auto lease = client->get(resources::kLeases, kWebhookNamespace, "gvirtus-webhook");
        leader = lease ? (*lease)["spec"].value("holderIdentity", "") : "";
        return !leader.empty();
      },
      30s));
  // The API server picks registrations up from its informer: dry runs (which the webhook
  // does not count) until a pod of each replica comes back with a backend.
  for (const auto& replica : kReplicas) {
    INFO("waiting for the registration of replica " << replica);
    REQUIRE(eventually(
        [&] {
          WriteOptions dryRun;
          dryRun.dryRun = true;
          auto pod = client->create(resources::kPods, kNamespace,
                                    gvirtusPod("probe-" + replica, replica), dryRun);
          return pod && !backendOf(*pod).empty();
        },
        30s));
  }

  std::mutex mutex;
  std::map<std::string, int> perBackend;
  std::map<std::string, std::map<std::string, int>> perReplica;
  std::vector<std::string> replicaOf;
  std::mt19937 coin(static_cast<unsigned>(envInt("BENCH_SPREAD_SEED", 1)));
  for (int i = 0; i < pods; ++i) {
    replicaOf.push_back(kReplicas[coin() % kReplicas.size()]);
  }
  std::atomic<int> next = 0;
  std::atomic<int> failed = 0;
  const auto start = std::chrono::steady_clock::now();
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < clients; ++t) {
      threads.emplace_back([&] {
        for (int i = next++; i < pods; i = next++) {
          const std::string& replica = replicaOf[static_cast<size_t>(i)];
          auto created = client->create(resources::kPods, kNamespace,
                                        gvirtusPod("spread-" + std::to_string(i), replica));
          const std::string backend = created ? backendOf(*created) : "";
          if (backend.empty()) {
            ++failed;
            continue;
          }
          std::lock_guard lock(mutex);
          ++perBackend[backend];
          ++perReplica[replica][backend];
        }
      });
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(failed == 0);
  REQUIRE(perBackend.size() <= static_cast<size_t>(kBackends));

  // Pods per backend, in the order of the backends given pods; one given none counts too.
  auto counts = [&](const std::map<std::string, int>& assigned) {
    std::vector<int> out(kBackends, 0);
    size_t i = 0;
    for (const auto& [backend, total] : perBackend) {
      const auto it = assigned.find(backend);
      out[i++] = it == assigned.end() ? 0 : it->second;
    }
    return out;
  };
  auto spreadOf = [](const std::vector<int>& values) {
    const auto [low, high] = std::minmax_element(values.begin(), values.end());
    return *high - *low;
  };
  auto list = [](const std::vector<int>& values) {
    std::string text;
    for (int value : values) {
      text += format("%s%d", text.empty() ? "" : " / ", value);
    }
    return text;
  };
  const std::vector<int> all = counts(perBackend);
  const int spread = spreadOf(all);
  std::string byReplica;
  for (const auto& replica : kReplicas) {
    const std::vector<int> theirs = counts(perReplica[replica]);
    byReplica += format("%s%s: %d pods (%s)", byReplica.empty() ? "" : "; ", replica.c_str(),
                        std::accumulate(theirs.begin(), theirs.end(), 0), list(theirs).c_str());
  }
  const std::string text = format(
      "%d GVirtuS pods created through the API server by %d concurrent client%s in %.1f s, "
      "each reviewed by one of two webhook replicas (--leader-elect: the leader breaks ties up "
      "the endpoints, the other down), chosen by a fair coin (policy least-connections; %d "
      "backends, no session reported yet).\n\n"
      "| | |\n|---|---|\n"
      "| pods per backend | %s |\n"
      "| of which each replica assigned | %s |\n"
      "| busiest less least busy backend | %d (goal: at most 1) |\n\n",
      pods, clients, clients == 1 ? "" : "s", seconds, kBackends, list(all).c_str(),
      byReplica.c_str(), spread);
  std::printf("\nspread with two webhook replicas\n%s\n", text.c_str());
  append("spread.md", text);
  summaryRow(format("Spread over %d backends, %d pods from %d concurrent client%s, two webhook "
                    "replicas (busiest less least busy; goal at most 1)",
                    kBackends, pods, clients, clients == 1 ? "" : "s"),
             format("%d (%s)", spread, list(all).c_str()), section);

  for (const auto& replica : kReplicas) {
    (void)client->remove(resources::kMutatingWebhookConfigurations, "", "bench-spread-" + replica);
  }
}
