#include "common/kube/connect.h"

#include "common/kube/access/config.h"

namespace gvirtus {

void KubeApiLimits::applyTo(KubeClientOptions& options) const {
  options.qps = static_cast<double>(qps);
  options.burst = static_cast<int>(burst);
}

void addKubeApiFlags(FlagSet& flags, KubeApiLimits& limits, std::string_view use) {
  std::string qpsHelp = "requests per second to the API server";
  if (!use.empty()) {
    qpsHelp += " (" + std::string(use) + ")";
  }
  flags.addInt("kube-api-qps", &limits.qps, std::move(qpsHelp), 1, 10000);
  flags.addInt("kube-api-burst", &limits.burst, "request burst to the API server", 1, 10000);
}

Result<std::unique_ptr<KubeClient>> connectKubeClient(std::string_view program,
                                                      const std::string& kubeconfigPath,
                                                      KubeClientOptions options) {
  auto config = loadKubeConfig(kubeconfigPath);
  if (!config) {
    return fail(config.error().context(kubeconfigPath.empty()
                                           ? "in-cluster configuration (or set --kubeconfig)"
                                           : "--kubeconfig"));
  }
  options.userAgent = std::string(program) + "/" + GVIRTUS_VERSION;
  auto client = KubeClient::create(*config, std::move(options));
  if (!client) {
    return fail(client.error().context("Kubernetes client"));
  }
  return std::move(*client);
}

}  // namespace gvirtus
