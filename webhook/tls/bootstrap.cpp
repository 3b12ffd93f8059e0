#include "webhook/tls/bootstrap.h"

#include "common/net/ipv4_resolver.h"

#include "common/base/base64.h"
#include "common/base/strings.h"
#include "common/telemetry/log.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

constexpr const char* kDnsNamesAnnotation = "gvirtus.io/serving-dns-names";
constexpr int kConflictRetries = 3;

std::string joinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) {
    out += (out.empty() ? "" : ",") + name;
  }
  return out;
}

Result<std::string> dataField(const json& secret, const char* key) {
  auto data = secret.find("data");
  if (data == secret.end() || !data->is_object()) {
    return fail("the Secret has no data");
  }
  auto value = data->find(key);
  if (value == data->end() || !value->is_string()) {
    return fail(std::string("the Secret has no ") + key);
  }
  auto decoded = base64Decode(value->get<std::string>());
  if (!decoded) {
    return fail(std::string("the Secret's ") + key + " is " + decoded.error().message);
  }
  return *decoded;
}

}  // namespace

std::vector<std::string> servingDnsNames(const std::string& service, const std::string& ns) {
  return {service, service + "." + ns, service + "." + ns + ".svc",
          service + "." + ns + ".svc.cluster.local"};
}

std::vector<std::string> servingNames(const TlsBootstrapOptions& options) {
  auto names = servingDnsNames(options.serviceName, options.ns);
  names.insert(names.end(), options.extraSans.begin(), options.extraSans.end());
  return names;
}

Result<TlsMaterial> renewServingCert(const TlsMaterial& material,
                                     const TlsBootstrapOptions& options) {
  TlsMaterial out = material;
  out.dnsNames = servingNames(options);
  std::vector<std::string> dns;
  std::vector<std::string> ips;
  for (const auto& name : out.dnsNames) {
    (isDottedIpv4(name) || name.find(':') != std::string::npos ? ips : dns).push_back(name);
  }
  auto serving = generateServingCert(material.ca, dns[2], dns, ips, options.servingValidity);
  if (!serving) {
    return fail(serving.error().context("serving certificate"));
  }
  out.serving = *serving;
  return out;
}

Result<TlsMaterial> generateTlsMaterial(const TlsBootstrapOptions& options) {
  auto ca = generateCa(options.serviceName + "." + options.ns + " webhook CA", options.caValidity);
  if (!ca) {
    return fail(ca.error().context("webhook CA"));
  }
  TlsMaterial material;
  material.ca = *ca;
  return renewServingCert(material, options);
}

json secretFor(const TlsBootstrapOptions& options, const TlsMaterial& material) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata",
           {{"name", options.secretName},
            {"namespace", options.ns},
            {"labels", {{"app.kubernetes.io/name", "gvirtus-webhook"}}},
            {"annotations", {{kDnsNamesAnnotation, joinNames(material.dnsNames)}}}}},
          {"type", "kubernetes.io/tls"},
          {"data",
           {{"ca.crt", base64Encode(material.ca.certPem)},
            {"ca.key", base64Encode(material.ca.keyPem)},
            {"tls.crt", base64Encode(material.serving.certPem)},
            {"tls.key", base64Encode(material.serving.keyPem)}}}};
}

Result<TlsMaterial> materialFromSecret(const json& secret) {
  TlsMaterial material;
  for (auto [key, target] :
       {std::pair{"ca.crt", &material.ca.certPem}, std::pair{"ca.key", &material.ca.keyPem},
        std::pair{"tls.crt", &material.serving.certPem},
        std::pair{"tls.key", &material.serving.keyPem}}) {
    auto value = dataField(secret, key);
    if (!value) {
      return fail(value.error());
    }
    *target = *value;
  }
  if (auto metadata = secret.find("metadata"); metadata != secret.end()) {
    if (auto annotations = metadata->find("annotations");
        annotations != metadata->end() && annotations->is_object()) {
      if (auto names = annotations->find(kDnsNamesAnnotation);
          names != annotations->end() && names->is_string()) {
        material.dnsNames = splitList(names->get<std::string>());
      }
    }
  }
  return material;
}

Renewal renewalNeeded(const TlsMaterial& material, const TlsBootstrapOptions& options,
                      std::chrono::system_clock::time_point now) {
  auto caEnd = certificateNotAfter(material.ca.certPem);
  if (!caEnd || !validatePrivateKeyPem(material.ca.keyPem) || *caEnd - now < options.renewBefore) {
    return Renewal::Everything;
  }
  auto servingEnd = certificateNotAfter(material.serving.certPem);
  if (!servingEnd || !validatePrivateKeyPem(material.serving.keyPem) ||
      *servingEnd - now < options.renewBefore || material.dnsNames != servingNames(options)) {
    return Renewal::ServingCert;
  }
  return Renewal::None;
}

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

Result<TlsMaterial> TlsBootstrap::ensureSecret() {
  for (int attempt = 0;; ++attempt) {
    auto secret = client_.get(resources::kSecrets, options_.ns, options_.secretName);
    if (!secret && secret.error().isNotFound()) {
      auto material = generateTlsMaterial(options_);
      if (!material) {
        return fail(material.error());
      }
      auto created =
          client_.create(resources::kSecrets, options_.ns, secretFor(options_, *material));
      if (created) {
        log::info("created the webhook CA and serving certificate",
                  {{"secret", options_.ns + "/" + options_.secretName}});
        return material;
      }
      if (!created.error().isConflict() || attempt >= kConflictRetries) {
        return fail(created.error().context("create Secret " + options_.secretName));
      }
      continue;  // another replica created it first: use theirs
    }
    if (!secret) {
      return fail(secret.error().context("read Secret " + options_.secretName));
    }
    auto material = materialFromSecret(*secret);
    const Renewal renewal =
        material ? renewalNeeded(*material, options_, std::chrono::system_clock::now())
                 : Renewal::Everything;
    if (renewal == Renewal::None) {
      return material;
    }
    auto renewed = renewal == Renewal::Everything ? generateTlsMaterial(options_)
                                                  : renewServingCert(*material, options_);
    if (!renewed) {
      return fail(renewed.error());
    }
    // Keep what others added to the Secret (labels, annotations); its type is immutable.
    json updated = *secret;
    const json fresh = secretFor(options_, *renewed);
    updated["data"] = fresh["data"];
    updated["metadata"]["annotations"][kDnsNamesAnnotation] = joinNames(renewed->dnsNames);
    auto written = client_.update(resources::kSecrets, options_.ns, options_.secretName, updated);
    if (written) {
      log::info(
          renewal == Renewal::Everything ? "renewed the webhook CA and serving certificate"
                                         : "renewed the webhook serving certificate",
          {{"secret", options_.ns + "/" + options_.secretName},
           {"reason", material ? "close to expiry or other DNS names" : material.error().message}});
      return renewed;
    }
    if (!written.error().isConflict() || attempt >= kConflictRetries) {
      return fail(written.error().context("update Secret " + options_.secretName));
    }
    // Another replica renewed first: read theirs.
  }
}

Result<void> TlsBootstrap::ensureCaBundle(const std::string& caPem) {
  for (int attempt = 0;; ++attempt) {
    auto config =
        client_.get(resources::kMutatingWebhookConfigurations, "", options_.webhookConfigName);
    if (!config) {
      return fail(config.error().context("read MutatingWebhookConfiguration " +
                                         options_.webhookConfigName));
    }
    const JsonPatch patch = caBundlePatch(*config, caPem);
    if (patch.empty()) {
      return {};
    }
    auto patched = client_.patch(resources::kMutatingWebhookConfigurations, "",
                                 options_.webhookConfigName, PatchType::Json, patch.dump());
    if (patched) {
      log::info("wrote the webhook CA into the caBundle",
                {{"mutatingWebhookConfiguration", options_.webhookConfigName}});
      return {};
    }
    // 422: a test failed (the webhooks changed under us); read again.
    if (patched.error().httpStatus != 422 && !patched.error().isConflict()) {
      return fail(patched.error().context("patch caBundle"));
    }
    if (attempt >= kConflictRetries) {
      return fail(patched.error().context("patch caBundle"));
    }
  }
}

Result<void> TlsBootstrap::syncOnce() {
  auto material = ensureSecret();
  if (!material) {
    std::lock_guard lock(mutex_);
    if (installedCert_.empty()) {
      notReady_ = material.error().message;
    }
    return fail(material.error());
  }
  bool changed = false;
  {
    std::lock_guard lock(mutex_);
    changed = installedCert_ != material->serving.certPem;
  }
  if (changed) {
    if (auto ok = install_(material->serving); !ok) {
      return fail(ok.error().context("install the serving certificate"));
    }
    std::lock_guard lock(mutex_);
    installedCert_ = material->serving.certPem;
  }
  auto bundle = ensureCaBundle(material->ca.certPem);
  std::lock_guard lock(mutex_);
  caBundleInPlace_ = bundle.has_value();
  notReady_ = bundle ? "" : bundle.error().message;
  if (!bundle) {
    return fail(bundle.error());
  }
  return {};
}

void TlsBootstrap::start() {
  if (thread_.joinable()) {
    return;
  }
  // One key: every pass looks at the Secret and the whole webhook configuration.
  static constexpr const char* kKey = "tls";
  controller_ =
      std::make_unique<Controller>(ControllerOptions{.name = "tls-bootstrap",
                                                     .backoffInitial = std::chrono::seconds(1),
                                                     .backoffMax = std::chrono::seconds(30)},
                                   [this](const std::string&) -> Result<SyncResult> {
                                     if (auto ok = syncOnce(); !ok) {
                                       return fail(ok.error().context("webhook TLS bootstrap"));
                                     }
                                     return SyncResult{.requeueAfter = options_.resyncPeriod};
                                   });
  webhookConfigs_ =
      std::make_unique<ResourceCache>(client_, resources::kMutatingWebhookConfigurations, "", "",
                                      "metadata.name=" + options_.webhookConfigName);
  // An edit of the configuration (a caBundle removed) is repaired at once; a deleted one
  // is the uninstall's business.
  auto handlers = controller_->enqueueOnAnyChange(kKey);
  handlers.onDelete = nullptr;
  webhookConfigs_->addHandlers(std::move(handlers));
  webhookConfigs_->start();
  controller_->enqueue(kKey);
  thread_ = std::jthread([this](std::stop_token stop) { controller_->run(stop); });
}

void TlsBootstrap::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  if (webhookConfigs_) {
    webhookConfigs_->stop();
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
