#include "webhook/tls/bootstrap.h"

#include "common/base/base64.h"
#include "common/telemetry/log.h"

namespace gvirtus::webhook {

using nlohmann::json;

JsonPatch caBundlePatch(const json& webhookConfig, const std::string& caPem) {
  JsonPatch patch;
  const std::string bundle = base64Encode(caPem);
  auto webhooks = webhookConfig.find("webhooks");
  if (webhooks == webhookConfig.end() || !webhooks->is_array()) {
    return patch;
  }
  for (size_t i = 0; i < webhooks->size(); ++i) {
    const json& webhook = (*webhooks)[i];
    auto clientConfig = webhook.find("clientConfig");
    if (clientConfig != webhook.end() && clientConfig->is_object()) {
      auto current = clientConfig->find("caBundle");
      if (current != clientConfig->end() && *current == bundle) {
        continue;
      }
    }
    const std::string index = std::to_string(i);
    patch.test(jsonPointer({"webhooks", index, "name"}), webhook.value("name", json()));
    if (clientConfig == webhook.end() || !clientConfig->is_object()) {
      patch.add(jsonPointer({"webhooks", index, "clientConfig"}), json{{"caBundle", bundle}});
    } else {
      patch.add(jsonPointer({"webhooks", index, "clientConfig", "caBundle"}), bundle);
    }
  }
  return patch;
}

TlsBootstrap::TlsBootstrap(KubeClient& client, TlsBootstrapOptions options, Install install)
    : client_(client), options_(std::move(options)), install_(std::move(install)) {}

TlsBootstrap::~TlsBootstrap() {
  stop();
}

// Each look reads the Secret and the configuration from caches. A write that another
// replica won is a conflict (409): the controller looks again after its backoff, quietly,
// and the watch brings the winner's object meanwhile.
Result<TlsMaterial> TlsBootstrap::ensureSecret() {
  const ObjectSnapshot secret = secrets_->get(options_.ns, options_.secretName);
  if (!secret) {
    auto material = generateTlsMaterial(options_);
    if (!material) {
      return fail(material.error());
    }
    auto created = client_.create(resources::kSecrets, options_.ns, secretFor(options_, *material));
    if (!created) {
      return fail(created.error().context("create Secret " + options_.secretName));
    }
    log::info("created the webhook CA and serving certificate",
              {{"secret", options_.ns + "/" + options_.secretName}});
    return material;
  }
  auto material = materialFromSecret(*secret);
  const Renewal renewal = material
                              ? renewalNeeded(*material, options_, std::chrono::system_clock::now())
                              : Renewal::Everything;
  if (renewal == Renewal::None) {
    return material;
  }
  auto renewed = renewal == Renewal::Everything ? generateTlsMaterial(options_)
                                                : renewServingCert(*material, options_);
  if (!renewed) {
    return fail(renewed.error());
  }
  auto written = client_.update(resources::kSecrets, options_.ns, options_.secretName,
                                renewedSecret(*secret, options_, *renewed));
  if (!written) {
    return fail(written.error().context("update Secret " + options_.secretName));
  }
  log::info(
      renewal == Renewal::Everything ? "renewed the webhook CA and serving certificate"
                                     : "renewed the webhook serving certificate",
      {{"secret", options_.ns + "/" + options_.secretName},
       {"reason", material ? "close to expiry or other DNS names" : material.error().message}});
  return renewed;
}

Result<TlsMaterial> TlsBootstrap::readSecret() const {
  const ObjectSnapshot secret = secrets_->get(options_.ns, options_.secretName);
  if (!secret) {
    return fail("Secret " + options_.ns + "/" + options_.secretName +
                " not found: the CA step (gvirtus-webhook --ca-role=issue) writes it");
  }
  auto material = materialFromSecret(*secret);
  if (!material) {
    return fail(material.error().context("Secret " + options_.ns + "/" + options_.secretName));
  }
  return material;
}

Result<void> TlsBootstrap::checkCaBundle(const std::string& caPem) const {
  const ObjectSnapshot config = webhookConfigs_->get("", options_.webhookConfigName);
  if (!config) {
    return fail("read MutatingWebhookConfiguration " + options_.webhookConfigName + ": not found");
  }
  if (!caBundlePatch(*config, caPem).empty()) {
    return fail("the caBundle of " + options_.webhookConfigName +
                " does not hold the Secret's CA yet: the CA step (--ca-role=issue) writes it");
  }
  return {};
}

Result<void> TlsBootstrap::ensureCaBundle(const std::string& caPem) {
  const ObjectSnapshot config = webhookConfigs_->get("", options_.webhookConfigName);
  if (!config) {
    return fail("read MutatingWebhookConfiguration " + options_.webhookConfigName + ": not found");
  }
  const JsonPatch patch = caBundlePatch(*config, caPem);
  if (patch.empty()) {
    return {};
  }
  auto patched = client_.patch(resources::kMutatingWebhookConfigurations, "",
                               options_.webhookConfigName, PatchType::Json, patch.dump());
  if (!patched) {
    Error error = patched.error().context("patch caBundle");
    if (error.httpStatus == 422) {
      // A test of the patch failed: the webhooks changed under us, a conflict like a 409.
      error.httpStatus = 409;
    }
    return fail(std::move(error));
  }
  log::info("wrote the webhook CA into the caBundle",
            {{"mutatingWebhookConfiguration", options_.webhookConfigName}});
  return {};
}

Result<SyncResult> TlsBootstrap::sync() {
  auto material = options_.role == CaRole::Serve ? readSecret() : ensureSecret();
  if (!material) {
    std::lock_guard lock(mutex_);
    if (installedCert_.empty()) {
      notReady_ = material.error().message;
    }
    return fail(material.error().context("webhook TLS bootstrap"));
  }
  const TlsMaterial& current = *material;
  bool changed = false;
  {
    std::lock_guard lock(mutex_);
    changed = installedCert_ != current.serving.certPem;
  }
  if (changed) {
    if (install_) {
      if (auto ok = install_(current.serving); !ok) {
        return fail(ok.error().context("webhook TLS bootstrap: install the serving certificate"));
      }
    }
    std::lock_guard lock(mutex_);
    installedCert_ = current.serving.certPem;
  }
  auto bundle = options_.role == CaRole::Serve ? checkCaBundle(current.ca.certPem)
                                               : ensureCaBundle(current.ca.certPem);
  std::lock_guard lock(mutex_);
  caBundleInPlace_ = bundle.has_value();
  notReady_ = bundle ? "" : bundle.error().message;
  if (!bundle) {
    return fail(bundle.error().context("webhook TLS bootstrap"));
  }
  return SyncResult{.requeueAfter = options_.resyncPeriod};
}

void TlsBootstrap::start() {
  if (thread_.joinable()) {
    return;
  }
  // One key: every look reads the Secret and the whole webhook configuration.
  static constexpr const char* kKey = "tls";
  controller_ =
      std::make_unique<Controller>(ControllerOptions{.name = "tls-bootstrap",
                                                     .backoffInitial = std::chrono::seconds(1),
                                                     .backoffMax = std::chrono::seconds(30)},
                                   [this](const std::string&) { return sync(); });
  // Only our Secret and our configuration, by name (the Role and the ClusterRole allow list
  // and watch of these names alone). An edit of either (a caBundle removed, the Secret
  // renewed by another replica) is looked at at once; a deleted configuration is the
  // uninstall's business.
  secrets_ = std::make_unique<ResourceCache>(client_, resources::kSecrets, options_.ns, "",
                                             "metadata.name=" + options_.secretName);
  webhookConfigs_ =
      std::make_unique<ResourceCache>(client_, resources::kMutatingWebhookConfigurations, "", "",
                                      "metadata.name=" + options_.webhookConfigName);
  secrets_->addHandlers(controller_->enqueueOnAnyChange(kKey));
  auto handlers = controller_->enqueueOnAnyChange(kKey);
  handlers.onDelete = nullptr;
  webhookConfigs_->addHandlers(std::move(handlers));
  secrets_->start();
  webhookConfigs_->start();
  controller_->enqueue(kKey);
  // The first look waits for both caches' first contents.
  thread_ = std::jthread([this](std::stop_token stop) {
    controller_->run(stop,
                     [this] { return secrets_->hasSynced() && webhookConfigs_->hasSynced(); });
  });
}

void TlsBootstrap::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  if (webhookConfigs_) {
    webhookConfigs_->stop();
  }
  if (secrets_) {
    secrets_->stop();
  }
}

bool TlsBootstrap::ready() const {
  std::lock_guard lock(mutex_);
  return !installedCert_.empty() && caBundleInPlace_;
}

std::string TlsBootstrap::notReadyReason() const {
  std::lock_guard lock(mutex_);
  if (!installedCert_.empty() && caBundleInPlace_) {
    return "";
  }
  return notReady_.empty() ? "the caBundle is not written yet" : notReady_;
}

}  // namespace gvirtus::webhook
