#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/base/error.h"
#include "common/kube/client.h"
#include "common/process/flags.h"

namespace gvirtus {

// How fast a binary may call the API server: --kube-api-qps and --kube-api-burst.
struct KubeApiLimits {
  int64_t qps = 20;
  int64_t burst = 40;

  void applyTo(KubeClientOptions& options) const;
};

// Adds --kube-api-qps and --kube-api-burst, defaulting to `limits`' values; `use`, when
// given, says in --help what the requests are for.
void addKubeApiFlags(FlagSet& flags, KubeApiLimits& limits, std::string_view use = {});

// The one way a binary reaches the API server: the kubeconfig at `kubeconfigPath` (the
// in-cluster service account when empty) and a client that names "<program>/<version>"
// as its User-Agent. The error names what was at fault: the flag, the in-cluster
// configuration or the client.
Result<std::unique_ptr<KubeClient>> connectKubeClient(std::string_view program,
                                                      const std::string& kubeconfigPath,
                                                      KubeClientOptions options);

}  // namespace gvirtus
