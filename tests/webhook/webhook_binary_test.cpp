// gvirtus-webhook as a black box: flags and exit codes, and POST /mutate over real HTTPS on
// loopback with static backends and TLS files (no API server at all).

#include <signal.h>

#include <catch2/catch.hpp>

#include "support/child_process.h"
#include "support/cluster_env.h"
#include "webhook/fixtures.h"
#include "webhook/webhook_process.h"

using namespace gvirtus::webhook::testing;
using gvirtus::testing::runCommand;

namespace {

size_t lineCount(const std::string& text) {
  size_t lines = 0;
  for (char c : text) {
    lines += c == '\n';
  }
  return lines;
}

}  // namespace

TEST_CASE("help and version flags exit 0", "[webhook-binary]") {
  auto [helpCode, help] = runCommand({webhookBinary(), "--help"});
  CHECK(helpCode == 0);
  for (const char* flag : {"--listen",
                           "--tls-cert-file",
                           "--tls-key-file",
                           "--webhook-config-name",
                           "--backend-namespace",
                           "--backend-selector",
                           "--backend-port",
                           "--static-backends",
                           "--policy",
                           "--add-gpu-limit",
                           "--scheduler-name",
                           "--kai-queue",
                           "--leader-elect",
                           "--kubeconfig",
                           "--log-level",
                           "--log-format",
                           "--health-addr",
                           "--kube-api-qps",
                           "--kube-api-burst",
                           "--autoscale-candidates",
                           "--autoscale-min",
                           "--autoscale-max",
                           "--scale-up-after",
                           "--scale-down-after"}) {
    CHECK_THAT(help, Catch::Contains(flag));
  }
  for (const char* flag : {"--leader-elect-lease-duration", "--leader-elect-renew-deadline",
                           "--leader-elect-retry-period"}) {
    CHECK_THAT(help, Catch::Contains(flag));
  }
  auto [versionCode, version] = runCommand({webhookBinary(), "--version"});
  CHECK(versionCode == 0);
  CHECK_THAT(version, Catch::StartsWith("gvirtus-webhook "));
}

TEST_CASE("bad flags exit 2 with one line naming the flag", "[webhook-binary]") {
  TempDir dir;
  const std::string cert = dir.write("tls.crt", "x");
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  for (const Case& c : std::vector<Case>{
           {{"--bogus"}, "gvirtus-webhook: --bogus: unknown flag"},
           {{"--policy", "fastest"}, "gvirtus-webhook: --policy: unknown policy \"fastest\""},
           {{"--static-backends", "10.0.0.1"}, "gvirtus-webhook: --static-backends: "},
           {{"--static-backends", "[::1]:9999"},
            "gvirtus-webhook: --static-backends: \"[::1]:9999\": GVirtuS takes IPv4"},
           {{"--backend-port", "70000"}, "gvirtus-webhook: --backend-port: "},
           {{"--tls-cert-file", cert},
            "gvirtus-webhook: --tls-key-file: needed with --tls-cert-file"},
           {{"--tls-cert-file", "/nonexistent.crt", "--tls-key-file", cert},
            "gvirtus-webhook: --tls-cert-file: cannot read"},
           {{"--ca-role", "both"}, "gvirtus-webhook: --ca-role: must be all, serve or issue"},
           {{"--ca-role=serve", "--tls-cert-file", cert, "--tls-key-file", cert},
            "gvirtus-webhook: --ca-role: a part of the own CA, which --tls-cert-file replaces"},
           {{"--listen", "nope"}, "gvirtus-webhook: --listen: "},
           {{"--add-gpu-limit=maybe"}, "gvirtus-webhook: --add-gpu-limit: "},
           {{"--log-format", "xml"}, "gvirtus-webhook: --log-format: "},
           {{"--backend-selector", ""}, "gvirtus-webhook: --backend-selector: "},
           {{"--leader-elect-lease-duration", "500ms"},
            "gvirtus-webhook: --leader-elect-lease-duration: must be at least 1s"},
           {{"--leader-elect-renew-deadline", "15s"},
            "gvirtus-webhook: --leader-elect-renew-deadline: must be positive and shorter"},
           {{"--leader-elect-retry-period", "9s"},
            "gvirtus-webhook: --leader-elect-retry-period: must be positive and shorter"},
           {{"--leader-elect-retry-period", "2"}, "gvirtus-webhook: --leader-elect-retry-period: "},
           {{"--kubeconfig", "/nonexistent/kubeconfig"}, "gvirtus-webhook: --kubeconfig: "},
           {{"--autoscale-candidates", "pool=gpu", "--autoscale-min", "3", "--autoscale-max", "2"},
            "gvirtus-webhook: --autoscale-min: must not exceed --autoscale-max"},
           {{"--autoscale-candidates", "pool=gpu", "--static-backends", "10.0.0.1:9999"},
            "gvirtus-webhook: --autoscale-candidates: not with --static-backends"},
           {{"--autoscale-candidates", "pool=gpu", "--scale-up-after", "0s"},
            "gvirtus-webhook: --scale-up-after: must be positive"},
           {{"--autoscale-max", "0"}, "gvirtus-webhook: --autoscale-max: "},
           {{"--kube-api-qps", "0"}, "gvirtus-webhook: --kube-api-qps: "},
           {{"--dra-claim-template", "gpu"}, "gvirtus-webhook: --dra-claim-template: needs --dra"},
           {{"--dra", "--dra-claim-template", "GPU_16Gi"},
            "gvirtus-webhook: --dra-claim-template: \"GPU_16Gi\" is not an object name"},
           {{"--dra", "--dra-claim-template", "gpu..16gi"},
            "gvirtus-webhook: --dra-claim-template: \"gpu..16gi\" is not an object name"},
           {{"--dra", "--dra-claim-template", "gpu", "--scheduler-name", "kai-scheduler"},
            "gvirtus-webhook: --dra-claim-template: not with --scheduler-name"},
           {{"--dra-extended-resource", "gvirtus.io/gpu"},
            "gvirtus-webhook: --dra-extended-resource: needs --dra"},
           {{"--dra", "--dra-extended-resource", "gpu"},
            "gvirtus-webhook: --dra-extended-resource: must be DOMAIN/NAME"},
           {{"--dra", "--dra-extended-resource", "kubernetes.io/gpu"},
            "gvirtus-webhook: --dra-extended-resource: the kubernetes.io domains hold native "
            "resources"}}) {
    std::vector<std::string> argv = {webhookBinary()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    auto [code, output] = runCommand(argv);
    INFO(output);
    CHECK(code == 2);
    CHECK_THAT(output, Catch::StartsWith(c.expected));
    CHECK(lineCount(output) == 1);
  }
}

TEST_CASE("POST /mutate over HTTPS with static backends and TLS files", "[webhook-binary]") {
  TempDir dir;
  TlsFiles tls(dir);
  WebhookProcess webhook({"--static-backends", "127.0.0.1:9999,127.0.0.2:9998", "--tls-cert-file",
                          tls.certFile, "--tls-key-file", tls.keyFile});
  CHECK(gvirtus::testing::eventually([&] {
    return gvirtus::testing::httpGet(webhook.healthPort(), "/readyz").starts_with("ok");
  }));
  auto client = webhook.client(tls.caFile);

  SECTION("a GVirtuS pod is mutated; the same connection serves many reviews") {
    const json pod = gvirtusPod({"app", "worker"});
    for (int i = 0; i < 20; ++i) {
      const std::string uid = "uid-" + std::to_string(i);
      auto response = client->Post("/mutate", admissionReview(pod, uid).dump(), "application/json");
      REQUIRE(response);
      REQUIRE(response->status == 200);
      const json answer = json::parse(response->body);
      CHECK(answer["response"]["uid"] == uid);
      const json out = applied(pod, patchOf(answer));
      const std::string backend = out["metadata"]["annotations"]["gvirtus.io/backend"];
      CHECK((backend == "127.0.0.1:9999" || backend == "127.0.0.2:9998"));
      CHECK_FALSE(out["metadata"]["annotations"].contains("gvirtus.io/backend-pod"));
      CHECK(out["spec"]["containers"][1]["env"][0]["name"] == "GVIRTUS_CONFIG");
    }
    const std::string metrics = gvirtus::testing::httpGet(webhook.healthPort(), "/metrics");
    CHECK(gvirtus::testing::metricValue(metrics,
                                        "gvirtus_webhook_reviews_total{result=\"patched\"}") == 20);
    // Least-connections over backends without load reports: an even split.
    CHECK(gvirtus::testing::metricValue(
              metrics, "gvirtus_webhook_backend_choices_total{backend=\"127.0.0.1:9999\"}") == 10);
    CHECK(gvirtus::testing::metricValue(metrics, "gvirtus_webhook_backends_available") == 2);
  }

  SECTION("bad bodies get 400 with a message") {
    for (const std::string& body : {std::string("garbage"), std::string("{\"kind\":\"Pod\"}"),
                                    std::string(4 * 1024 * 1024, ' ')}) {
      auto response = client->Post("/mutate", body, "application/json");
      REQUIRE(response);
      CHECK(response->status == 400);
      CHECK_THAT(response->body, Catch::StartsWith("bad AdmissionReview: "));
    }
    auto get = client->Get("/mutate");
    REQUIRE(get);
    CHECK(get->status == 405);
  }

  SECTION("new TLS files are picked up without a restart (cert-manager renewals)") {
    TempDir other;
    TlsFiles renewed(other);
    // Replaced the way the kubelet updates a mounted Secret: new files renamed into place.
    std::filesystem::copy_file(renewed.keyFile, dir.file("tls.key.new"));
    std::filesystem::copy_file(renewed.certFile, dir.file("tls.crt.new"));
    std::filesystem::rename(dir.file("tls.key.new"), tls.keyFile);
    std::filesystem::rename(dir.file("tls.crt.new"), tls.certFile);
    auto trustsNew = webhook.client(renewed.caFile);
    CHECK(gvirtus::testing::eventually([&] {
      auto response =
          trustsNew->Post("/mutate", admissionReview(gvirtusPod()).dump(), "application/json");
      return response && response->status == 200;
    }));
    auto trustsOld = webhook.client(tls.caFile);
    CHECK_FALSE(trustsOld->Post("/mutate", "{}", "application/json"));
  }

  SECTION("a client that does not trust the CA is refused") {
    TempDir other;
    TlsFiles stranger(other);
    auto untrusting = webhook.client(stranger.caFile);
    CHECK_FALSE(untrusting->Post("/mutate", "{}", "application/json"));
  }

  webhook.child().kill(SIGTERM);
  CHECK(webhook.child().wait(std::chrono::seconds(10)) == 0);
}
