#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>
#include <vector>

#include "common/contract/backend_requirements.h"
#include "common/kube/connect.h"
#include "common/process/flags.h"
#include "common/time/duration.h"
#include "webhook/autoscale/autoscaler.h"
#include "webhook/placement/static_source.h"
#include "webhook/tls/own_ca.h"

namespace gvirtus::webhook {

inline constexpr const char* kProgram = "gvirtus-webhook";

// Every flag of gvirtus-webhook (docs/pod-contract.md).
struct Options {
  CommonOptions common;
  std::string listen = ":8443";
  std::string tlsCertFile;
  std::string tlsKeyFile;
  std::string tlsSecretName = "gvirtus-webhook-tls";
  std::string webhookConfigName = "gvirtus-webhook";
  std::string serviceName = "gvirtus-webhook";
  std::vector<std::string> tlsExtraSans;
  // Without TLS files: which part of the own CA this process plays (webhook/tls/own_ca.h).
  CaRole caRole = CaRole::All;
  std::string ns;  // default: $POD_NAMESPACE, else gvirtus-system
  std::string backendNamespace = "gvirtus-system";
  std::string backendSelector = "app.kubernetes.io/component=backend";
  int backendPort = 9999;
  std::vector<StaticBackendSpec> staticBackends;
  Policy policy = Policy::LeastConnections;
  bool addGpuLimit = true;
  std::string schedulerName;
  std::string kaiQueue;
  bool leaderElect = false;
  // The Lease gvirtus-webhook in --namespace (client-go's defaults).
  Duration leaderElectLeaseDuration = std::chrono::seconds(15);
  Duration leaderElectRenewDeadline = std::chrono::seconds(10);
  Duration leaderElectRetryPeriod = std::chrono::seconds(2);
  // How long a backend pod may be not ready before the pods given it are recreated or
  // marked (webhook/follower/follower.h); 0 turns the backend follower off.
  Duration backendLostGrace = std::chrono::seconds(90);
  std::vector<std::string> plugins;
  size_t maxRequestBytes = 3 * 1024 * 1024;
  // The API client of the waiting-pod controller: releasing 1,000 waiting pods within 5s
  // takes 200 patches a second.
  KubeApiLimits kubeApi{.qps = 200, .burst = 400};
  AutoscaleOptions autoscale;
  // Publish the backends' GPUs as ResourceSlices of the DRA driver gpu.gvirtus.io
  // (docs/dra.md): needs resource.k8s.io/v1 (Kubernetes 1.34 and later).
  bool dra = false;
  // With --dra: GVirtuS pods get a claim from the ResourceClaimTemplate of this name in their
  // own namespace instead of a backend from the webhook (docs/dra.md); empty: off.
  std::string draClaimTemplate;
  // With --dra: the extended resource that the DeviceClass gpu.gvirtus.io names
  // (spec.extendedResourceName). Pods asking for it get the label gvirtus.io/dra, which the
  // backends' NetworkPolicy and the peer publisher select (docs/dra.md); empty: off.
  std::string draExtendedResource;
  // With --dra, where the API server serves binding conditions: how long a claimant's
  // binding waits for room on its backend before the device is given up
  // (webhook/dra/claim_binder.h); zero (the default): the devices carry no binding conditions.
  // Off by default: a claimant of a device near its capacity was found not to fit while
  // another claim of that device waited for its answer, and was parked until the scheduler's
  // periodic retry (docs/dra.md).
  Duration draBindingTimeout = Duration::zero();

  // TLS from files (else the webhook runs its own CA, which needs the API server).
  bool tlsFromFiles() const { return !tlsCertFile.empty(); }
  // With static backends and TLS files the webhook talks to no API server at all.
  bool needsApiServer() const { return staticBackends.empty() || !tlsFromFiles(); }
};

// Parses and validates argv. Returns the exit code when the program should stop now: 0
// after --help or --version (printed on stdout), 2 after a bad flag or configuration (a
// one-line reason naming the flag, on stderr).
std::expected<Options, int> parseOptions(int argc, const char* const* argv);

}  // namespace gvirtus::webhook
