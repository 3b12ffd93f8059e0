#include "webhook/tls/bootstrap.h"

#include <catch2/catch.hpp>

#include "common/base/base64.h"
#include "webhook/fixtures.h"

using namespace gvirtus::webhook;
using gvirtus::base64Decode;
using gvirtus::base64Encode;
using gvirtus::webhook::testing::applied;
using nlohmann::json;
using namespace std::chrono;

namespace {

TlsBootstrapOptions testOptions() {
  TlsBootstrapOptions options;
  options.ns = "gvirtus-system";
  options.serviceName = "gvirtus-webhook";
  options.webhookConfigName = "gvirtus-webhook";
  options.caValidity = hours(24 * 30);
  options.servingValidity = hours(24 * 10);
  options.renewBefore = hours(24 * 3);
  return options;
}

}  // namespace

TEST_CASE("the serving certificate's DNS names", "[tls-bootstrap]") {
  CHECK(servingDnsNames("hook", "ns") ==
        std::vector<std::string>{"hook", "hook.ns", "hook.ns.svc", "hook.ns.svc.cluster.local"});
}

TEST_CASE("material round-trips through the Secret", "[tls-bootstrap]") {
  const auto options = testOptions();
  auto material = generateTlsMaterial(options);
  REQUIRE(material.has_value());
  const json secret = secretFor(options, *material);
  CHECK(secret["metadata"]["name"] == "gvirtus-webhook-tls");
  CHECK(secret["metadata"]["namespace"] == "gvirtus-system");
  CHECK(secret["type"] == "kubernetes.io/tls");
  CHECK(base64Decode(secret["data"]["tls.crt"].get<std::string>()).value() ==
        material->serving.certPem);
  auto back = materialFromSecret(secret);
  REQUIRE(back.has_value());
  CHECK(back->ca.certPem == material->ca.certPem);
  CHECK(back->ca.keyPem == material->ca.keyPem);
  CHECK(back->serving.keyPem == material->serving.keyPem);
  CHECK(back->dnsNames == servingDnsNames("gvirtus-webhook", "gvirtus-system"));

  json broken = secret;
  broken["data"].erase("ca.key");
  CHECK_THAT(materialFromSecret(broken).error().message, Catch::Contains("ca.key"));
  broken = secret;
  broken["data"]["tls.crt"] = "!!";
  CHECK_FALSE(materialFromSecret(broken).has_value());
}

TEST_CASE("renewal well before expiry", "[tls-bootstrap]") {
  const auto options = testOptions();
  auto material = generateTlsMaterial(options);
  REQUIRE(material.has_value());
  const auto now = system_clock::now();
  CHECK(renewalNeeded(*material, options, now) == Renewal::None);
  // Serving certificate: 10 days, renewed with 3 left.
  CHECK(renewalNeeded(*material, options, now + hours(24 * 6)) == Renewal::None);
  CHECK(renewalNeeded(*material, options, now + hours(24 * 8)) == Renewal::ServingCert);
  // CA: 30 days, everything renewed with 3 left.
  CHECK(renewalNeeded(*material, options, now + hours(24 * 28)) == Renewal::Everything);

  auto other = options;
  other.serviceName = "renamed";
  CHECK(renewalNeeded(*material, other, now) == Renewal::ServingCert);
  auto renewed = renewServingCert(*material, other);
  REQUIRE(renewed.has_value());
  CHECK(renewed->ca.certPem == material->ca.certPem);
  CHECK(renewed->serving.certPem != material->serving.certPem);
  CHECK(renewalNeeded(*renewed, other, now) == Renewal::None);

  TlsMaterial garbage = *material;
  garbage.ca.certPem = "nope";
  CHECK(renewalNeeded(garbage, options, now) == Renewal::Everything);
}

TEST_CASE("the caBundle patch fills every webhook and is empty once in place", "[tls-bootstrap]") {
  const std::string ca = "-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n";
  const json config = {
      {"metadata", {{"name", "gvirtus-webhook"}}},
      {"webhooks", json::array({{{"name", "pods.gvirtus.io"},
                                 {"clientConfig", {{"service", {{"name", "gvirtus-webhook"}}}}}},
                                {{"name", "scheduling-map.gvirtus.io"},
                                 {"clientConfig", {{"caBundle", base64Encode("old")}}}}})}};
  const gvirtus::JsonPatch patch = caBundlePatch(config, ca);
  CHECK(patch.size() == 4);  // a test and an add per webhook
  const json out = applied(config, patch.toJson());
  CHECK(out["webhooks"][0]["clientConfig"]["caBundle"] == base64Encode(ca));
  CHECK(out["webhooks"][0]["clientConfig"]["service"]["name"] == "gvirtus-webhook");
  CHECK(out["webhooks"][1]["clientConfig"]["caBundle"] == base64Encode(ca));
  CHECK(caBundlePatch(out, ca).empty());

  // The webhooks were reordered meanwhile: the test fails, nothing is written.
  json reordered = config;
  std::swap(reordered["webhooks"][0], reordered["webhooks"][1]);
  CHECK_FALSE(gvirtus::applyJsonPatch(reordered, patch.toJson()).has_value());
}
