#include "webhook/options.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "common/base/strings.h"
#include "common/contract/gvirtus_properties.h"
#include "common/kube/api/object_names.h"
#include "common/net/sockets.h"

namespace gvirtus::webhook {
namespace {

Result<void> checkReadable(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    return fail("cannot read \"" + path + "\"");
  }
  return {};
}

// The admission listener, its certificate (files, or an own CA kept in a Secret).
void addServingFlags(FlagSet& flags, Options& options) {
  flags.addString("listen", &options.listen, "HOST:PORT of the HTTPS admission listener");
  flags.addString("tls-cert-file", &options.tlsCertFile,
                  "serving certificate chain (PEM), re-read when it changes; empty: run an "
                  "own CA kept in a Secret");
  flags.addString("tls-key-file", &options.tlsKeyFile, "private key of --tls-cert-file (PEM)");
  flags.addString("tls-secret-name", &options.tlsSecretName,
                  "Secret (in --namespace) holding the own CA and serving certificate");
  flags.addParsed("ca-role", "string", &options.caRole, "all",
                  "the own CA's part this process plays: all (keep the Secret and the caBundle, "
                  "serve admission), serve (only read them, kept by another process), issue "
                  "(only keep them: the CA step, no admission listener)",
                  [](const std::string& text) -> Result<CaRole> {
                    if (auto role = parseCaRole(text)) {
                      return *role;
                    }
                    return fail("must be all, serve or issue");
                  });
  flags.addString("webhook-config-name", &options.webhookConfigName,
                  "MutatingWebhookConfiguration whose caBundle the own CA is written to");
  flags.addString("service-name", &options.serviceName,
                  "Service in front of the webhook: the serving certificate is for "
                  "<service>.<namespace>.svc");
  flags.addList("tls-extra-sans", &options.tlsExtraSans,
                "more DNS names or IP addresses for the own CA's serving certificate, for a "
                "webhook registered by URL (e.g. 127.0.0.1)");
  flags.addString(
      "namespace", &options.ns,
      "the webhook's own namespace, of its Secret and Service ($POD_NAMESPACE when set)");
}

// Where backends come from, how one is chosen, and what a wired pod is given.
void addWiringFlags(FlagSet& flags, Options& options) {
  flags.addString("backend-namespace", &options.backendNamespace,
                  "namespace of the GVirtuS backend pods");
  flags.addString("backend-selector", &options.backendSelector,
                  "label selector of the GVirtuS backend pods");
  flags.addInt("backend-port", &options.backendPort, "TCP port of the GVirtuS backends", 1, 65535);
  flags.addParsed("static-backends", "list", &options.staticBackends, "",
                  "HOST:PORT,... of GVirtuS backends outside the cluster (used instead of "
                  "backend pods; host names are resolved to IPv4 every minute)",
                  [](const std::string& text) { return parseStaticBackends(splitList(text)); });
  flags.addParsed("policy", "string", &options.policy, "least-connections",
                  "backend selection: least-connections, round-robin, random or same-zone",
                  parsePolicy);
  flags.addBool("add-gpu-limit", &options.addGpuLimit,
                "add limits nvidia.com/gpu: 1 to the first wired container when none asks (not to "
                "gpu-fraction or gpu-memory pods that --scheduler-name schedules); an ask "
                "below 1 is refused either way");
  flags.addString("scheduler-name", &options.schedulerName,
                  "spec.schedulerName for GVirtuS pods without one (e.g. kai-scheduler)");
  flags.addString("kai-queue", &options.kaiQueue,
                  "label kai.scheduler/queue for GVirtuS pods without one");
  flags.addList("plugins", &options.plugins, "GVirtuS frontend plugins listed in properties.json");
  flags.addInt("max-request-bytes", &options.maxRequestBytes,
               "larger AdmissionReview bodies are refused with 400", 4096, 64 * 1024 * 1024);
}

// The leader's controllers: the election, the follower of lost backends.
void addControllerFlags(FlagSet& flags, Options& options) {
  flags.addBool("leader-elect", &options.leaderElect,
                "elect one replica (Lease gvirtus-webhook in --namespace) to run the "
                "waiting-pod controller; without it every replica runs it");
  flags.addDuration("leader-elect-lease-duration", &options.leaderElectLeaseDuration,
                    "how long a leader's Lease holds without renewal before another replica "
                    "takes over");
  flags.addDuration("leader-elect-renew-deadline", &options.leaderElectRenewDeadline,
                    "how long the leader retries renewing before it stops leading");
  flags.addDuration("leader-elect-retry-period", &options.leaderElectRetryPeriod,
                    "time between tries to acquire or renew the Lease");
  flags.addDuration("backend-lost-grace", &options.backendLostGrace,
                    "how long a backend pod may be not ready (or terminating past its grace "
                    "period) before the pods given it are recreated (owned) or marked (bare); a "
                    "backend pod gone or at a new address counts at once; 0: off");
  addKubeApiFlags(flags, options.kubeApi, "releases of waiting pods");
}

// The DRA driver gpu.gvirtus.io and the two ways pods ask it.
void addDraFlags(FlagSet& flags, Options& options) {
  flags.addBool("dra", &options.dra,
                "publish each backend's GPUs as ResourceSlices of the DRA driver gpu.gvirtus.io, "
                "for pods that ask with a ResourceClaim (Kubernetes 1.34 and later; the leader "
                "writes them)");
  flags.addString("dra-claim-template", &options.draClaimTemplate,
                  "with --dra: GVirtuS pods get a ResourceClaim from the ResourceClaimTemplate of "
                  "this name in their own namespace (the operator creates it there) instead of a "
                  "backend chosen by the webhook; empty: off");
  flags.addString("dra-extended-resource", &options.draExtendedResource,
                  "with --dra: the extended resource that the DeviceClass gpu.gvirtus.io names "
                  "(e.g. gvirtus.io/gpu); pods asking for it get a remote GPU from kube-scheduler "
                  "with nothing else GVirtuS-specific in their manifest; empty: off");
  flags.addDuration("dra-binding-timeout", &options.draBindingTimeout,
                    "with --dra, where the API server serves binding conditions (Kubernetes "
                    "1.36 and later): kube-scheduler binds a claimant only once its backend has "
                    "room for the session, and gives the device up when it has none for this "
                    "long (at most 10m, the scheduler's own limit; 60s is a good start); 0: bind "
                    "at once (docs/dra.md says when to turn it on)");
}

// Opting GPU nodes in and out as backends by demand.
void addAutoscaleFlags(FlagSet& flags, Options& options) {
  flags.addString("autoscale-candidates", &options.autoscale.candidates,
                  "label selector of GPU nodes the leader may opt in as backends when pods "
                  "wait (e.g. gvirtus.io/backend.candidate=true); empty: no autoscaling");
  flags.addInt("autoscale-min", &options.autoscale.min, "autoscaled backends kept even when idle",
               0, 10000);
  flags.addInt("autoscale-max", &options.autoscale.max, "autoscaled backends at most", 1, 10000);
  flags.addDuration("scale-up-after", &options.autoscale.scaleUpAfter,
                    "how long a pod may wait for a backend before a candidate node is opted in");
  flags.addDuration("scale-down-after", &options.autoscale.scaleDownAfter,
                    "how long an autoscaled backend must be idle (no connection, no pod) "
                    "before it is drained and its node opted out");
}

// The listener and its certificate: files both readable, or what the own CA needs.
Result<void> checkServing(const Options& options) {
  if (auto address = parseListenAddress(options.listen); !address) {
    return fail("--listen: " + address.error().message);
  }
  if (!options.common.healthAddr.empty()) {
    if (auto address = parseListenAddress(options.common.healthAddr); !address) {
      return fail("--health-addr: " + address.error().message);
    }
  }
  if (options.tlsCertFile.empty() != options.tlsKeyFile.empty()) {
    return fail(options.tlsCertFile.empty() ? "--tls-cert-file: needed with --tls-key-file"
                                            : "--tls-key-file: needed with --tls-cert-file");
  }
  if (options.tlsFromFiles()) {
    if (auto ok = checkReadable(options.tlsCertFile); !ok) {
      return fail("--tls-cert-file: " + ok.error().message);
    }
    if (auto ok = checkReadable(options.tlsKeyFile); !ok) {
      return fail("--tls-key-file: " + ok.error().message);
    }
    if (options.caRole != CaRole::All) {
      return fail("--ca-role: a part of the own CA, which --tls-cert-file replaces");
    }
  } else {
    if (options.ns.empty()) {
      return fail("--namespace: must not be empty without --tls-cert-file");
    }
    if (options.serviceName.empty()) {
      return fail("--service-name: must not be empty without --tls-cert-file");
    }
    if (options.tlsSecretName.empty()) {
      return fail("--tls-secret-name: must not be empty");
    }
  }
  return {};
}

// Backend pods named by a namespace and a selector (or static ones), and something to load.
Result<void> checkWiring(const Options& options) {
  if (options.staticBackends.empty()) {
    if (options.backendNamespace.empty()) {
      return fail("--backend-namespace: must not be empty");
    }
    if (options.backendSelector.empty()) {
      return fail("--backend-selector: must not be empty (it would select every pod)");
    }
  }
  if (options.plugins.empty()) {
    return fail("--plugins: must name at least one plugin");
  }
  return {};
}

// The claim and extended-resource paths, each only with --dra and names Kubernetes takes.
Result<void> checkDra(const Options& options) {
  if (options.dra && !options.staticBackends.empty()) {
    return fail("--dra: not with --static-backends (no pod says what GPUs they have)");
  }
  if (!options.draClaimTemplate.empty()) {
    if (!options.dra) {
      return fail("--dra-claim-template: needs --dra (the devices the claims are allocated from)");
    }
    if (!isDnsSubdomain(options.draClaimTemplate)) {
      return fail("--dra-claim-template: \"" + options.draClaimTemplate +
                  "\" is not an object name (lower-case letters, digits, '-' and '.', at most "
                  "253)");
    }
    if (!options.schedulerName.empty()) {
      return fail(
          "--dra-claim-template: not with --scheduler-name (KAI-Scheduler does not share a "
          "device among claims: docs/dra.md)");
    }
  }
  if (!options.draExtendedResource.empty()) {
    if (!options.dra) {
      return fail(
          "--dra-extended-resource: needs --dra (the devices the claims are allocated "
          "from)");
    }
    if (auto valid = validateExtendedResourceName(options.draExtendedResource); !valid) {
      return fail("--dra-extended-resource: " + valid.error().message);
    }
  }
  // kube-scheduler's own binding timeout is 10 minutes by default: past it the scheduler,
  // not the binder, gives the device up.
  if (options.draBindingTimeout < Duration::zero() ||
      options.draBindingTimeout > std::chrono::minutes(10)) {
    return fail("--dra-binding-timeout: " + formatDuration(options.draBindingTimeout) +
                " is not between 0 and 10m");
  }
  return {};
}

// Autoscaling only of nodes, within its bounds, after positive delays.
Result<void> checkAutoscale(const Options& options) {
  if (options.autoscale.enabled()) {
    if (!options.staticBackends.empty()) {
      return fail("--autoscale-candidates: not with --static-backends (they are not nodes)");
    }
    if (options.autoscale.min > options.autoscale.max) {
      return fail("--autoscale-min: must not exceed --autoscale-max");
    }
    if (options.autoscale.scaleUpAfter <= Duration::zero()) {
      return fail("--scale-up-after: must be positive");
    }
    if (options.autoscale.scaleDownAfter <= Duration::zero()) {
      return fail("--scale-down-after: must be positive");
    }
  }
  return {};
}

// The election's durations in the order client-go asks (lease > renew > retry * 1.2).
Result<void> checkControllers(const Options& options) {
  if (options.leaderElectLeaseDuration < std::chrono::seconds(1)) {
    return fail(
        "--leader-elect-lease-duration: must be at least 1s (the Lease holds whole "
        "seconds)");
  }
  if (options.leaderElectRenewDeadline <= Duration::zero() ||
      options.leaderElectRenewDeadline >=
          std::chrono::duration_cast<std::chrono::seconds>(options.leaderElectLeaseDuration)) {
    return fail(
        "--leader-elect-renew-deadline: must be positive and shorter than "
        "--leader-elect-lease-duration");
  }
  if (options.backendLostGrace < Duration::zero()) {
    return fail("--backend-lost-grace: must not be negative");
  }
  if (options.leaderElectRetryPeriod <= Duration::zero() ||
      options.leaderElectRetryPeriod * 12 / 10 >= options.leaderElectRenewDeadline) {
    return fail(
        "--leader-elect-retry-period: must be positive and shorter than "
        "--leader-elect-renew-deadline / 1.2");
  }
  return {};
}

}  // namespace

std::expected<Options, int> parseOptions(int argc, const char* const* argv) {
  Options options;
  options.ns = envOr("POD_NAMESPACE", "gvirtus-system");
  options.plugins = defaultPlugins();

  FlagSet flags(
      kProgram,
      "Mutating admission webhook: gives every GVirtuS pod (label gvirtus.io/enabled=true)\n"
      "one backend and its GVirtuS configuration, and pins pods of a\n"
      "gpu-scheduling-map to their nodes and GPUs.");
  addCommonFlags(flags, options.common);
  addServingFlags(flags, options);
  addWiringFlags(flags, options);
  addControllerFlags(flags, options);
  addDraFlags(flags, options);
  addAutoscaleFlags(flags, options);

  if (auto exit = parseCommandLine(flags, options.common, argc, argv)) {
    return std::unexpected(*exit);
  }
  auto bad = [&](const std::string& reason) { return std::unexpected(usageError(flags, reason)); };
  for (auto check : {checkServing, checkWiring, checkDra, checkAutoscale, checkControllers}) {
    if (auto valid = check(options); !valid) {
      return bad(valid.error().message);
    }
  }
  return options;
}

}  // namespace gvirtus::webhook
