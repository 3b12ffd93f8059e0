// The webhook's own CA on the real control plane: one Secret shared by replicas that start
// together, the caBundle written and rewritten when overwritten, serving certificate
// renewal, and the binary in this mode (ready only once the CA is in place).

#include <catch2/catch.hpp>
#include <thread>

#include "webhook/cluster_fixtures.h"
#include "webhook/tls/bootstrap.h"

using namespace gvirtus::webhook;
using namespace gvirtus::webhook::testing;
using gvirtus::PemKeyPair;
namespace resources = gvirtus::resources;

namespace {

// A configuration whose webhooks match nothing (and fail open), for its caBundle only.
json inertConfiguration(const std::string& name) {
  json webhook = {{"name", "inert.gvirtus.io"},
                  {"clientConfig", {{"url", "https://127.0.0.1:1/mutate"}}},
                  {"rules", json::array({{{"apiGroups", {""}},
                                          {"apiVersions", {"v1"}},
                                          {"operations", {"CREATE"}},
                                          {"resources", {"pods"}}}})},
                  {"objectSelector", {{"matchLabels", {{"gvirtus.io/never", "true"}}}}},
                  {"admissionReviewVersions", {"v1"}},
                  {"sideEffects", "None"},
                  {"failurePolicy", "Ignore"}};
  json second = webhook;
  second["name"] = "inert-2.gvirtus.io";
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", "MutatingWebhookConfiguration"},
          {"metadata", {{"name", name}}},
          {"webhooks", json::array({webhook, second})}};
}

struct ConfigGuard {
  gvirtus::KubeClient& client;
  std::string name;
  ~ConfigGuard() { (void)client.remove(resources::kMutatingWebhookConfigurations, "", name); }
};

std::vector<std::string> caBundles(gvirtus::KubeClient& client, const std::string& name) {
  std::vector<std::string> out;
  auto config = client.get(resources::kMutatingWebhookConfigurations, "", name);
  if (config) {
    for (const auto& webhook : (*config)["webhooks"]) {
      out.push_back(webhook["clientConfig"].value("caBundle", ""));
    }
  }
  return out;
}

TlsMaterial secretMaterial(gvirtus::KubeClient& client, const std::string& ns,
                           const std::string& name) {
  auto secret = client.get(resources::kSecrets, ns, name);
  REQUIRE(secret.has_value());
  auto material = materialFromSecret(*secret);
  REQUIRE(material.has_value());
  return *material;
}

// `openssl s_client` to the listener on `port`, verifying its certificate against `caPem`
// for `host`: the exit code and what it printed.
auto handshake(int port, const std::string& caPem, const std::string& host) {
  TempDir dir;
  const std::string caFile = dir.write("ca.crt", caPem);
  return gvirtus::testing::runCommand(
      {"/bin/sh", "-c",
       "openssl s_client -connect 127.0.0.1:" + std::to_string(port) + " -servername " + host +
           " -verify_hostname " + host + " -CAfile " + caFile +
           " -verify_return_error </dev/null 2>&1"});
}

bool ready(int healthPort) {
  return gvirtus::testing::httpGet(healthPort, "/readyz").starts_with("ok");
}

}  // namespace

TEST_CASE("replicas starting together share one CA, written into the caBundle",
          "[tls-bootstrap][integration]") {
  auto client = gvirtus::testing::adminClient();
  TestNamespace ns(*client, "wh-tls");
  ConfigGuard guard{*client, "gvirtus-webhook-tls-it-" + randomSuffix()};
  REQUIRE(
      client->create(resources::kMutatingWebhookConfigurations, "", inertConfiguration(guard.name))
          .has_value());

  TlsBootstrapOptions options;
  options.ns = ns.name();
  options.serviceName = "gvirtus-webhook";
  options.webhookConfigName = guard.name;
  options.resyncPeriod = std::chrono::seconds(1);

  // Four replicas race to create the Secret.
  std::mutex mutex;
  std::vector<std::string> installed(4);
  std::vector<std::unique_ptr<TlsBootstrap>> replicas;
  for (size_t i = 0; i < installed.size(); ++i) {
    replicas.push_back(std::make_unique<TlsBootstrap>(
        *client, options, [&, i](const PemKeyPair& pair) -> gvirtus::Result<void> {
          std::lock_guard lock(mutex);
          installed[i] = pair.certPem;
          return {};
        }));
  }
  std::vector<std::jthread> starts;
  for (auto& replica : replicas) {
    starts.emplace_back([&replica] { replica->start(); });
  }
  starts.clear();  // joined
  REQUIRE(eventually([&] {
    return std::all_of(replicas.begin(), replicas.end(), [](auto& r) { return r->ready(); });
  }));
  const TlsMaterial material = secretMaterial(*client, ns.name(), options.secretName);
  {
    std::lock_guard lock(mutex);
    for (const auto& cert : installed) {
      CHECK(cert == material.serving.certPem);
    }
  }
  const std::string bundle = gvirtus::base64Encode(material.ca.certPem);
  CHECK(caBundles(*client, guard.name) == std::vector<std::string>{bundle, bundle});
  CHECK(material.dnsNames == servingDnsNames("gvirtus-webhook", ns.name()));

  SECTION("an overwritten caBundle is written again") {
    auto patched = client->patch(
        resources::kMutatingWebhookConfigurations, "", guard.name, gvirtus::PatchType::Json,
        R"([{"op":"replace","path":"/webhooks/1/clientConfig/caBundle","value":"Zm9v"}])");
    REQUIRE(patched.has_value());
    CHECK(eventually([&] {
      return caBundles(*client, guard.name) == std::vector<std::string>{bundle, bundle};
    }));
  }

  SECTION("a serving certificate close to its end is renewed under the same CA") {
    replicas.clear();
    TlsBootstrapOptions renewing = options;
    // The Secret's certificate has a year left, less than this: renewed at once.
    renewing.renewBefore = std::chrono::hours(24 * 400);
    std::string last;
    TlsBootstrap replica(*client, renewing, [&](const PemKeyPair& pair) -> gvirtus::Result<void> {
      std::lock_guard lock(mutex);
      last = pair.certPem;
      return {};
    });
    replica.start();
    // Renewed from what its caches show, then installed in the same look. With this
    // renewBefore every certificate is due, so it renews at each look: stopped, its last
    // look's write is the one installed.
    REQUIRE(eventually([&] {
      return secretMaterial(*client, ns.name(), options.secretName).serving.certPem !=
             material.serving.certPem;
    }));
    replica.stop();
    const TlsMaterial renewed = secretMaterial(*client, ns.name(), options.secretName);
    CHECK(renewed.ca.certPem == material.ca.certPem);
    std::lock_guard lock(mutex);
    CHECK(last == renewed.serving.certPem);
  }
}

TEST_CASE("gvirtus-webhook with its own CA is ready once the CA is in place",
          "[tls-bootstrap][integration]") {
  auto client = gvirtus::testing::adminClient();
  TestNamespace ns(*client, "wh-tls");
  const std::string configName = "gvirtus-webhook-tls-it-" + randomSuffix();
  ConfigGuard guard{*client, configName};

  WebhookProcess webhook({"--kubeconfig", kubeconfigPath(), "--static-backends", "127.0.0.1:9999",
                          "--namespace", ns.name(), "--service-name", "gvirtus-webhook",
                          "--webhook-config-name", configName});
  // No configuration yet: not ready, and once the first pass has failed /readyz says why.
  std::string notReady;
  CHECK(eventually([&] {
    notReady = gvirtus::testing::httpGet(webhook.healthPort(), "/readyz");
    return notReady.find(configName) != std::string::npos;
  }));
  CHECK_FALSE(notReady.starts_with("ok"));

  REQUIRE(
      client->create(resources::kMutatingWebhookConfigurations, "", inertConfiguration(configName))
          .has_value());
  INFO(webhook.child().output());
  REQUIRE(eventually([&] { return ready(webhook.healthPort()); }, 30s));
  const TlsMaterial material = secretMaterial(*client, ns.name(), "gvirtus-webhook-tls");
  CHECK(caBundles(*client, configName)[0] == gvirtus::base64Encode(material.ca.certPem));

  // The listener serves the Secret's certificate: it verifies against the CA for the
  // Service's DNS name.
  auto [code, output] =
      handshake(webhook.port(), material.ca.certPem, "gvirtus-webhook." + ns.name() + ".svc");
  INFO(output);
  CHECK(code == 0);
  CHECK_THAT(output, Catch::Contains("Verify return code: 0 (ok)"));
}

TEST_CASE("split: the CA step alone writes the Secret and the caBundle, the webhook reads them",
          "[tls-bootstrap][integration]") {
  auto client = gvirtus::testing::adminClient();
  TestNamespace ns(*client, "wh-tls");
  const std::string configName = "gvirtus-webhook-tls-it-" + randomSuffix();
  ConfigGuard guard{*client, configName};
  REQUIRE(
      client->create(resources::kMutatingWebhookConfigurations, "", inertConfiguration(configName))
          .has_value());
  const std::vector<std::string> common = {
      "--kubeconfig",   kubeconfigPath(),  "--namespace",           ns.name(),
      "--service-name", "gvirtus-webhook", "--webhook-config-name", configName};

  std::vector<std::string> serveArgs = {"--static-backends", "127.0.0.1:9999", "--ca-role=serve"};
  serveArgs.insert(serveArgs.end(), common.begin(), common.end());
  WebhookProcess webhook(serveArgs);
  // Alone, the serving replica writes nothing: not ready, and says who writes the Secret.
  std::string notReady;
  CHECK(eventually([&] {
    notReady = gvirtus::testing::httpGet(webhook.healthPort(), "/readyz");
    return notReady.find("--ca-role=issue") != std::string::npos;
  }));
  CHECK_FALSE(notReady.starts_with("ok"));
  CHECK(client->get(resources::kSecrets, ns.name(), "gvirtus-webhook-tls").error().httpStatus ==
        404);
  CHECK(caBundles(*client, configName) == std::vector<std::string>{"", ""});

  std::vector<std::string> issueArgs = {"--ca-role=issue"};
  issueArgs.insert(issueArgs.end(), common.begin(), common.end());
  WebhookProcess caStep(issueArgs);
  INFO(caStep.child().output());
  CHECK(eventually([&] { return ready(caStep.healthPort()); }, 30s));
  INFO(webhook.child().output());
  REQUIRE(eventually([&] { return ready(webhook.healthPort()); }, 30s));
  const TlsMaterial material = secretMaterial(*client, ns.name(), "gvirtus-webhook-tls");
  const std::string bundle = gvirtus::base64Encode(material.ca.certPem);
  CHECK(caBundles(*client, configName) == std::vector<std::string>{bundle, bundle});

  // The serving replica serves the CA step's certificate.
  auto [code, output] =
      handshake(webhook.port(), material.ca.certPem, "gvirtus-webhook." + ns.name() + ".svc");
  INFO(output);
  CHECK(code == 0);

  // A caBundle overwritten by someone else: the CA step writes it back (the serving
  // replica only watches), and the serving replica stays or becomes ready again.
  auto patched = client->patch(
      resources::kMutatingWebhookConfigurations, "", configName, gvirtus::PatchType::Json,
      R"([{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":"Zm9v"}])");
  REQUIRE(patched.has_value());
  CHECK(eventually([&] {
    return caBundles(*client, configName) == std::vector<std::string>{bundle, bundle};
  }));
  CHECK(eventually([&] { return ready(webhook.healthPort()); }, 30s));
}
