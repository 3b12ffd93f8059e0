#include "kubectl-gvirtus/run.h"

#include <cstdio>
#include <iostream>
#include <memory>

#include "common/kube/access/config.h"
#include "common/kube/client.h"
#include "common/process/flags.h"
#include "kubectl-gvirtus/cluster_view.h"
#include "kubectl-gvirtus/options.h"
#include "kubectl-gvirtus/report.h"
#include "kubectl-gvirtus/snapshot.h"

namespace gvirtus::kubectl_gvirtus {
namespace {

int fatal(const std::string& reason) {
  std::fprintf(stderr, "%s: %s\n", kProgram, reason.c_str());
  return kExitFatal;
}

// The kubeconfig's file and context, or in-cluster without one; the context's namespace
// is the default of -n.
struct Connection {
  std::unique_ptr<KubeClient> client;
  std::string ns;  // the context's namespace, or "default"
};

Result<Connection> connect(const Options& options) {
  auto config = options.kubeconfig.empty()
                    ? loadInClusterConfig()
                    : loadKubeconfigFile(options.kubeconfig, options.context);
  if (!config) {
    return fail(config.error().context(options.kubeconfig.empty()
                                           ? "no kubeconfig ($KUBECONFIG, ~/.kube/config, "
                                             "--kubeconfig) and not in a cluster"
                                           : "--kubeconfig " + options.kubeconfig));
  }
  KubeClientOptions clientOptions;
  clientOptions.userAgent = std::string(kProgram) + "/" + GVIRTUS_VERSION;
  clientOptions.maxRetries = 2;
  const std::string ns = config->ns.empty() ? "default" : config->ns;
  auto client = KubeClient::create(*config, clientOptions);
  if (!client) {
    return fail(client.error());
  }
  return Connection{std::move(*client), ns};
}

void print(const nlohmann::json& value) {
  std::cout << value.dump(2) << "\n";
}

}  // namespace

int run(const Options& options) {
  auto connection = connect(options);
  if (!connection) {
    return fatal(connection.error().message);
  }
  KubeClient& client = *connection->client;
  const auto now = std::chrono::system_clock::now();

  if (options.command == Command::Why) {
    const std::string ns = options.ns.empty() ? connection->ns : options.ns;
    auto pod = readPod(client, ns, options.pod);
    if (!pod) {
      return fatal(pod.error().message);
    }
    // Without the backends (no right to list them), the pod is explained from its own
    // annotations and Events.
    Snapshot cluster;
    if (auto read = readCluster(client, options, false)) {
      cluster = std::move(*read);
    }
    const auto backends =
        backendViews(cluster.backendPods, cluster.gvirtusPods, options.backendPort, now);
    const PodExplanation explanation =
        explainPod(pod->pod, pod->events, backends,
                   indexBackendPods(cluster.backendPods, options.backendNamespace), now);
    if (options.output == Output::Json) {
      print(toJson(explanation));
    } else {
      std::cout << explanationText(explanation, now);
    }
    return kExitOk;
  }

  auto cluster = readCluster(client, options, options.command == Command::Status);
  if (!cluster) {
    return fatal(cluster.error().message);
  }
  const auto backends =
      backendViews(cluster->backendPods, cluster->gvirtusPods, options.backendPort, now);
  nlohmann::json backendList = nlohmann::json::array();
  for (const auto& b : backends) {
    backendList.push_back(toJson(b));
  }
  if (options.command == Command::Backends) {
    if (options.output == Output::Json) {
      print({{"backends", backendList}});
    } else {
      std::cout << backendsTable(backends);
    }
    return kExitOk;
  }
  const PodEvents events(cluster->events);
  const auto waiting = waitingViews(cluster->gvirtusPods, events, backends, now);
  const auto lost =
      lostViews(cluster->gvirtusPods,
                indexBackendPods(cluster->backendPods, options.backendNamespace), events, now);
  const auto tainted = taintedViews(cluster->taintRules, now);
  if (options.output == Output::Json) {
    nlohmann::json waitingList = nlohmann::json::array();
    for (const auto& w : waiting) {
      waitingList.push_back(toJson(w));
    }
    nlohmann::json lostList = nlohmann::json::array();
    for (const auto& l : lost) {
      lostList.push_back(toJson(l));
    }
    nlohmann::json taintedList = nlohmann::json::array();
    for (const auto& t : tainted) {
      taintedList.push_back(toJson(t));
    }
    print({{"backends", backendList},
           {"waiting", waitingList},
           {"backendLost", lostList},
           {"taintedBackends", taintedList}});
  } else {
    std::cout << statusText(backends, waiting, lost, tainted, now);
  }
  return kExitOk;
}

}  // namespace gvirtus::kubectl_gvirtus
