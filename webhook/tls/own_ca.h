#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/error.h"
#include "common/time/duration.h"
#include "common/tls/certificates.h"

// The webhook's own CA, for clusters without cert-manager (no --tls-cert-file): what it
// issues, and how the CA and the serving certificate are kept in the one Secret that every
// replica shares.
namespace gvirtus::webhook {

// The part of the own CA a process plays (--ca-role). Split, the rights to write the Secret
// and the MutatingWebhookConfiguration belong to a process that parses no admission review
// (Issue), and the webhook that does (Serve) may only read them.
enum class CaRole {
  All,    // keeps the Secret and the caBundle, and serves with the Secret's certificate
  Serve,  // serves with the Secret's certificate; the Secret and the caBundle are Issue's
  Issue,  // keeps the Secret and the caBundle; serves nothing
};
std::optional<CaRole> parseCaRole(std::string_view text);  // all, serve, issue
const char* caRoleName(CaRole role);

struct TlsBootstrapOptions {
  CaRole role = CaRole::All;
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
// `secret` holding `material` instead, with what others added to it (labels, annotations)
// and its resourceVersion kept, so that the update is a compare-and-swap.
nlohmann::json renewedSecret(const nlohmann::json& secret, const TlsBootstrapOptions& options,
                             const TlsMaterial& material);

enum class Renewal { None, ServingCert, Everything };
// What must be renewed at `now`: everything when the CA is unreadable or within
// renewBefore of its end; the serving certificate when it is, or when it was issued for
// other DNS names.
Renewal renewalNeeded(const TlsMaterial& material, const TlsBootstrapOptions& options,
                      std::chrono::system_clock::time_point now);

}  // namespace gvirtus::webhook
