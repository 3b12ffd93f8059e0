#pragma once

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
#include "webhook/tls/own_ca.h"

// Keeps the own CA (webhook/tls/own_ca.h) in place for the part this process plays: the
// Secret created and renewed, its serving certificate installed in the HTTPS server, the
// CA in the caBundle of the MutatingWebhookConfiguration.
namespace gvirtus::webhook {

// The JSON patch that sets clientConfig.caBundle (base64 PEM) in every webhook of the
// configuration that lacks it or has another one; each write is guarded by a test of the
// webhook's name. Empty when all are in place.
JsonPatch caBundlePatch(const nlohmann::json& webhookConfig, const std::string& caPem);

class TlsBootstrap {
 public:
  // Installs a new serving certificate in the HTTPS server; null for CaRole::Issue.
  using Install = std::function<Result<void>(const PemKeyPair&)>;

  TlsBootstrap(KubeClient& client, TlsBootstrapOptions options, Install install);
  ~TlsBootstrap();
  TlsBootstrap(const TlsBootstrap&) = delete;
  TlsBootstrap& operator=(const TlsBootstrap&) = delete;

  // Caches of the Secret and the configuration (by name), and a thread that looks at them:
  // once they have synced, then again every resyncPeriod, at once when either changes, and
  // with backoff after a failure (common/controller/controller.h). A look reads (or, but
  // for CaRole::Serve, creates or renews) the Secret, installs its serving certificate (but
  // for CaRole::Issue), and writes the caBundle where it is missing or different (for
  // CaRole::Serve: waits until it is in place). Two replicas starting together converge on
  // the Secret whose create won (409 AlreadyExists: the winner's comes through the watch).
  void start();
  void stop();

  // The serving certificate is installed (for CaRole::Issue: the Secret holds one) and the
  // CA is in every webhook's caBundle.
  bool ready() const;
  // Why not ready, in words ("" when ready).
  std::string notReadyReason() const;

 private:
  Result<SyncResult> sync();
  // The Secret's material, created or renewed where needed; a conflict (409) when another
  // replica's write won.
  Result<TlsMaterial> ensureSecret();
  // The Secret's material as another process keeps it (CaRole::Serve).
  Result<TlsMaterial> readSecret() const;
  // The CA in every webhook's caBundle; a conflict (409) when the configuration changed
  // under the patch.
  Result<void> ensureCaBundle(const std::string& caPem);
  // The CA is in every webhook's caBundle already (CaRole::Serve).
  Result<void> checkCaBundle(const std::string& caPem) const;

  KubeClient& client_;
  const TlsBootstrapOptions options_;
  const Install install_;

  mutable std::mutex mutex_;
  std::string installedCert_;  // the serving certificate installed (Issue: the Secret's)
  bool caBundleInPlace_ = false;
  std::string notReady_ = "the serving certificate is not ready yet";

  std::unique_ptr<Controller> controller_;  // outlives the caches whose handlers use it
  std::unique_ptr<ResourceCache> secrets_;
  std::unique_ptr<ResourceCache> webhookConfigs_;
  std::jthread thread_;
};

}  // namespace gvirtus::webhook
