#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/base/error.h"
#include "common/base/json_patch.h"
#include "common/cache/resource_cache.h"
#include "common/controller/controller.h"
#include "common/kube/client.h"
#include "common/time/duration.h"
#include "common/tls/certificates.h"

// The webhook's own CA, for clusters without cert-manager (no --tls-cert-file): the CA and
// the serving certificate live in one Secret that every replica shares, and the CA goes
// into the caBundle of the MutatingWebhookConfiguration.
namespace gvirtus::webhook {

struct TlsBootstrapOptions {
  std::string ns;  // the webhook's namespace, where the Secret lives
  std::string secretName = "gvirtus-webhook-tls";
  std::string serviceName;  // the serving certificate is for <service>.<ns>.svc
  // More names for the serving certificate, DNS names or IP addresses (a webhook registered
  // by URL, e.g. https://127.0.0.1:8443/mutate). Replicas sharing the Secret must agree.
  std::vector<std::string> extraSans;
  std::string webhookConfigName;  // MutatingWebhookConfiguration to keep the caBundle in
  std::chrono::hours caValidity{24 * 365 * 10};
  std::chrono::hours servingValidity{24 * 365};
  // Renewed when less than this is left (of the serving certificate, or of the CA, which
  // renews both).
  std::chrono::hours renewBefore{24 * 90};
  // How often the Secret and the caBundle are checked besides watch notifications.
  Duration resyncPeriod = std::chrono::minutes(1);
};

// What the Secret holds.
struct TlsMaterial {
  PemKeyPair ca;
  PemKeyPair serving;
  std::vector<std::string> dnsNames;  // those the serving certificate was issued for
};

// <service>, <service>.<ns>, <service>.<ns>.svc, <service>.<ns>.svc.cluster.local.
std::vector<std::string> servingDnsNames(const std::string& service, const std::string& ns);
// Every subject alternative name of the serving certificate: the Service's DNS names, then
// the extra ones.
std::vector<std::string> servingNames(const TlsBootstrapOptions& options);

// A new CA and a serving certificate signed by it.
Result<TlsMaterial> generateTlsMaterial(const TlsBootstrapOptions& options);
// A serving certificate for `names`, signed by the CA of `material`.
Result<TlsMaterial> renewServingCert(const TlsMaterial& material,
                                     const TlsBootstrapOptions& options);

// The Secret object (type kubernetes.io/tls, plus ca.crt and ca.key) and back.
nlohmann::json secretFor(const TlsBootstrapOptions& options, const TlsMaterial& material);
Result<TlsMaterial> materialFromSecret(const nlohmann::json& secret);

enum class Renewal { None, ServingCert, Everything };
// What must be renewed at `now`: everything when the CA is unreadable or within
// renewBefore of its end; the serving certificate when it is, or when it was issued for
// other DNS names.
Renewal renewalNeeded(const TlsMaterial& material, const TlsBootstrapOptions& options,
                      std::chrono::system_clock::time_point now);

// The JSON patch that sets clientConfig.caBundle (base64 PEM) in every webhook of the
// configuration that lacks it or has another one; each write is guarded by a test of the
// webhook's name. Empty when all are in place.
JsonPatch caBundlePatch(const nlohmann::json& webhookConfig, const std::string& caPem);

class TlsBootstrap {
 public:
  // Installs a new serving certificate in the HTTPS server.
  using Install = std::function<Result<void>(const PemKeyPair&)>;

  TlsBootstrap(KubeClient& client, TlsBootstrapOptions options, Install install);
  ~TlsBootstrap();
  TlsBootstrap(const TlsBootstrap&) = delete;
  TlsBootstrap& operator=(const TlsBootstrap&) = delete;

  // Caches of the Secret and the configuration (by name), and a thread that looks at them:
  // once they have synced, then again every resyncPeriod, at once when either changes, and
  // with backoff after a failure (common/controller/controller.h). A look reads (or
  // creates, or renews) the Secret, installs its serving certificate, and writes the
  // caBundle where it is missing or different. Two replicas starting together converge on
  // the Secret whose create won (409 AlreadyExists: the winner's comes through the watch).
  void start();
  void stop();

  // The serving certificate is installed and the CA is in every webhook's caBundle.
  bool ready() const;
  // Why not ready, in words ("" when ready).
  std::string notReadyReason() const;

 private:
  Result<SyncResult> sync();
  // The Secret's material, created or renewed where needed; a conflict (409) when another
  // replica's write won.
  Result<TlsMaterial> ensureSecret();
  // The CA in every webhook's caBundle; a conflict (409) when the configuration changed
  // under the patch.
  Result<void> ensureCaBundle(const std::string& caPem);

  KubeClient& client_;
  const TlsBootstrapOptions options_;
  const Install install_;

  mutable std::mutex mutex_;
  std::string installedCert_;
  bool caBundleInPlace_ = false;
  std::string notReady_ = "the serving certificate is not ready yet";

  std::unique_ptr<Controller> controller_;  // outlives the caches whose handlers use it
  std::unique_ptr<ResourceCache> secrets_;
  std::unique_ptr<ResourceCache> webhookConfigs_;
  std::jthread thread_;
};

}  // namespace gvirtus::webhook
