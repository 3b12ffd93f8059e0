#include "webhook/tls/own_ca.h"

#include "common/base/base64.h"
#include "common/base/strings.h"
#include "common/net/ipv4_resolver.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

constexpr const char* kDnsNamesAnnotation = "gvirtus.io/serving-dns-names";

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

std::optional<CaRole> parseCaRole(std::string_view text) {
  if (text == "all") {
    return CaRole::All;
  }
  if (text == "serve") {
    return CaRole::Serve;
  }
  if (text == "issue") {
    return CaRole::Issue;
  }
  return std::nullopt;
}

const char* caRoleName(CaRole role) {
  switch (role) {
    case CaRole::All:
      return "all";
    case CaRole::Serve:
      return "serve";
    case CaRole::Issue:
      return "issue";
  }
  return "all";
}

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

json renewedSecret(const json& secret, const TlsBootstrapOptions& options,
                   const TlsMaterial& material) {
  json updated = secret;
  updated["data"] = secretFor(options, material)["data"];
  updated["metadata"]["annotations"][kDnsNamesAnnotation] = joinNames(material.dnsNames);
  return updated;
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

}  // namespace gvirtus::webhook
