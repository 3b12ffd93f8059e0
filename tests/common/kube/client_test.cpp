// KubeClient against a loopback TLS server (tests/support/tls_test_server.h) that stands in
// for the API server; the real API server is exercised by the integration tests.
#include "common/kube/client.h"

#include <httplib.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/black_hole.h"
#include "support/eventually.h"
#include "support/manual_clock.h"
#include "support/tls_test_server.h"

namespace gvirtus {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;
using testing::eventually;
namespace fs = std::filesystem;

const testing::TestPki& pki() {
  static const testing::TestPki value = testing::makeTestPki("kube-client-test-ca");
  return value;
}

const testing::TestPki& otherPki() {
  static const testing::TestPki value = testing::makeTestPki("some-other-ca");
  return value;
}

// What the server saw of one request.
struct Seen {
  std::string method;
  std::string path;
  std::string target;
  httplib::Params params;
  std::string contentType;
  std::string body;
  std::string authorization;
};

class Recorder {
 public:
  void add(const httplib::Request& request) {
    std::lock_guard lock(mutex_);
    seen_.push_back(Seen{request.method, request.path, request.target, request.params,
                         request.get_header_value("Content-Type"), request.body,
                         request.get_header_value("Authorization")});
  }
  std::vector<Seen> all() const {
    std::lock_guard lock(mutex_);
    return seen_;
  }
  Seen last() const {
    std::lock_guard lock(mutex_);
    return seen_.empty() ? Seen{} : seen_.back();
  }
  size_t size() const {
    std::lock_guard lock(mutex_);
    return seen_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Seen> seen_;
};

std::string param(const Seen& seen, const std::string& key) {
  auto it = seen.params.find(key);
  return it == seen.params.end() ? std::string("<absent>") : it->second;
}

std::unique_ptr<KubeClient> makeClient(KubeConfig config, KubeClientOptions options = {}) {
  auto client = KubeClient::create(std::move(config), std::move(options));
  if (!client) {
    FAIL("KubeClient::create: " << client.error().message);
  }
  return std::move(*client);
}

json status(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason},
          {"code", code}};
}

// Echoes who the caller is.
void addEcho(httplib::Server& server, const std::string& pattern) {
  server.Get(pattern, [](const httplib::Request& request, httplib::Response& response) {
    const char* sni = request.ssl != nullptr
                          ? SSL_get_servername(request.ssl, TLSEXT_NAMETYPE_host_name)
                          : nullptr;
    json body = {{"kind", "Pod"},
                 {"apiVersion", "v1"},
                 {"cn", testing::peerCommonName(request)},
                 {"authorization", request.get_header_value("Authorization")},
                 {"userAgent", request.get_header_value("User-Agent")},
                 {"accept", request.get_header_value("Accept")},
                 {"sni", sni != nullptr ? sni : ""}};
    response.set_content(body.dump(), "application/json");
  });
}

TEST_CASE("client over TLS with a client certificate and a bearer token", "[kube_client]") {
  testing::TlsTestServer server(pki(), /*requireClientCert=*/true);
  addEcho(server.http(), "/api/v1/namespaces/default/pods/p");
  server.start();

  KubeConfig config = server.kubeConfig();
  config.clientCertPem = pki().client.certPem;
  config.clientKeyPem = pki().client.keyPem;
  config.token = "abc";
  KubeClientOptions options;
  options.userAgent = "gvirtus-test/1";
  auto client = makeClient(config, options);
  CHECK(client->server() == server.url());
  auto pod = client->get(resources::kPods, "default", "p");
  REQUIRE(pod.has_value());
  CHECK((*pod)["cn"] == "test-user");
  CHECK((*pod)["authorization"] == "Bearer abc");
  CHECK((*pod)["userAgent"] == "gvirtus-test/1");
  CHECK((*pod)["accept"] == "application/json");

  // Keep-alive connections are reused and the answer stays the same.
  for (int i = 0; i < 3; ++i) {
    REQUIRE(client->get(resources::kPods, "default", "p").has_value());
  }

  SECTION("without a client certificate the server refuses the connection") {
    KubeConfig anonymous = server.kubeConfig();
    KubeClientOptions noRetry;
    noRetry.maxRetries = 0;
    auto refused = makeClient(anonymous, noRetry)->get(resources::kPods, "default", "p");
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().message.starts_with("GET /api/v1/namespaces/default/pods/p: "));
  }
}

TEST_CASE("server certificate verification", "[kube_client]") {
  testing::TlsTestServer server(pki());
  addEcho(server.http(), "/api/v1/nodes/n");
  server.start();

  SECTION("a server signed by another CA is refused") {
    KubeConfig config = server.kubeConfig();
    config.caPem = otherPki().ca.certPem;
    auto result = makeClient(config)->get(resources::kNodes, "", "n");
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().message == "GET /api/v1/nodes/n: server certificate of " + server.url() +
                                        " refused: unable to get local issuer certificate");
  }
  SECTION("a name the certificate does not carry is refused") {
    KubeConfig config = server.kubeConfig();
    config.tlsServerName = "api.example.com";
    auto result = makeClient(config)->get(resources::kNodes, "", "n");
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().message.ends_with("refused: hostname mismatch"));
  }
  SECTION("tls-server-name is verified and sent as SNI") {
    KubeConfig config = server.kubeConfig();
    config.tlsServerName = "localhost";
    auto result = makeClient(config)->get(resources::kNodes, "", "n");
    REQUIRE(result.has_value());
    CHECK((*result)["sni"] == "localhost");
  }
  SECTION("insecure-skip-tls-verify accepts any certificate") {
    KubeConfig config = server.kubeConfig();
    config.caPem = otherPki().ca.certPem;
    config.insecureSkipTlsVerify = true;
    CHECK(makeClient(config)->get(resources::kNodes, "", "n").has_value());
  }
  SECTION("the system trust store does not know the test CA") {
    KubeConfig config = server.kubeConfig();
    config.caPem.clear();
    auto result = makeClient(config)->get(resources::kNodes, "", "n");
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().message.find("refused") != std::string::npos);
  }
}

TEST_CASE("client creation errors", "[kube_client]") {
  KubeConfig config;
  config.server = "ftp://example.com";
  auto bad = KubeClient::create(config);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message == "server \"ftp://example.com\" is not an http(s) URL");

  config.server = "https://127.0.0.1:99999";
  CHECK(KubeClient::create(config).error().message ==
        "server \"https://127.0.0.1:99999\": bad port");

  config.server = "https://127.0.0.1:6443";
  config.clientCertPem = pki().client.certPem;
  config.clientKeyPem = otherPki().client.keyPem;
  auto mismatch = KubeClient::create(config);
  REQUIRE_FALSE(mismatch.has_value());
  CHECK(mismatch.error().message == "client certificate and client key do not match");

  config.clientKeyPem.clear();
  CHECK_FALSE(KubeClient::create(config).has_value());

  KubeConfig ipv6;
  ipv6.server = "https://[fd00:10:96::1]:6443/";
  auto made = KubeClient::create(ipv6);
  REQUIRE(made.has_value());
  CHECK((*made)->server() == "https://[fd00:10:96::1]:6443/");
  ipv6.server = "https://[fd00::1:6443";
  CHECK(KubeClient::create(ipv6).error().message ==
        "server \"https://[fd00::1:6443\": unterminated IPv6 address");
}

class ScratchFile {
 public:
  ScratchFile() {
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            ("kube-client-token-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  }
  ~ScratchFile() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  void write(const std::string& text, fs::file_time_type mtime) {
    std::ofstream(path_, std::ios::trunc) << text;
    fs::last_write_time(path_, mtime);
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

TEST_CASE("a rotated token file is picked up", "[kube_client]") {
  testing::TlsTestServer server(pki());
  addEcho(server.http(), "/api/v1/nodes/n");
  server.start();

  ScratchFile token;
  const auto t0 = fs::file_time_type::clock::now();
  token.write("token-a\n", t0);
  KubeConfig config = server.kubeConfig();
  config.token = "static-token";
  config.tokenFile = token.path();
  KubeClientOptions options;
  options.tokenCheckInterval = Duration::zero();  // every request looks
  auto client = makeClient(config, options);
  auto first = client->get(resources::kNodes, "", "n");
  REQUIRE(first.has_value());
  CHECK((*first)["authorization"] == "Bearer token-a");

  token.write("token-b\n", t0 + seconds(10));
  auto second = client->get(resources::kNodes, "", "n");
  REQUIRE(second.has_value());
  CHECK((*second)["authorization"] == "Bearer token-b");

  // An emptied file (mid-rotation) keeps the last good token.
  token.write("", t0 + seconds(20));
  auto third = client->get(resources::kNodes, "", "n");
  REQUIRE(third.has_value());
  CHECK((*third)["authorization"] == "Bearer token-b");
}

TEST_CASE("API Status errors are parsed", "[kube_client]") {
  testing::TlsTestServer server(pki());
  server.http().Get("/api/v1/namespaces/default/pods/x",
                    [](const httplib::Request&, httplib::Response& response) {
                      response.status = 404;
                      response.set_content(status(404, "NotFound", "pods \"x\" not found").dump(),
                                           "application/json");
                    });
  server.http().Put("/api/v1/namespaces/default/pods/x", [](const httplib::Request&,
                                                            httplib::Response& response) {
    response.status = 409;
    response.set_content(status(409, "Conflict",
                                "Operation cannot be fulfilled on pods \"x\": the object has "
                                "been modified")
                             .dump(),
                         "application/json");
  });
  server.http().Get("/api/v1/nodes/html", [](const httplib::Request&, httplib::Response& response) {
    response.status = 502;
    response.set_content("<html>\n<body>Bad Gateway</body>\n</html>" + std::string(400, ' '),
                         "text/html");
  });
  server.start();
  KubeClientOptions options;
  options.maxRetries = 0;
  auto client = makeClient(server.kubeConfig(), options);

  auto missing = client->get(resources::kPods, "default", "x");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().message ==
        "GET /api/v1/namespaces/default/pods/x: 404 NotFound: pods \"x\" not found");
  CHECK(missing.error().httpStatus == 404);
  CHECK(missing.error().reason == "NotFound");
  CHECK(missing.error().isNotFound());

  auto conflict = client->update(resources::kPods, "default", "x", {{"kind", "Pod"}});
  REQUIRE_FALSE(conflict.has_value());
  CHECK(conflict.error().isConflict());
  CHECK(conflict.error().reason == "Conflict");
  CHECK(conflict.error().message.starts_with(
      "PUT /api/v1/namespaces/default/pods/x: 409 Conflict: Operation cannot be fulfilled"));

  auto html = client->get(resources::kNodes, "", "html");
  REQUIRE_FALSE(html.has_value());
  CHECK(html.error().httpStatus == 502);
  CHECK(html.error().reason.empty());
  CHECK(html.error().message.starts_with("GET /api/v1/nodes/html: 502: <html> <body>Bad Gateway"));
  CHECK(html.error().message.find('\n') == std::string::npos);
  CHECK(html.error().message.size() < 300);
}

TEST_CASE("retries honour Retry-After and the verb", "[kube_client]") {
  testing::TlsTestServer server(pki());
  std::atomic<int> calls{0};
  std::atomic<int> failFirst{1};
  std::atomic<int> failStatus{429};
  std::atomic<bool> retryAfter{true};
  auto handler = [&](const httplib::Request&, httplib::Response& response) {
    const int n = ++calls;
    if (n <= failFirst.load()) {
      response.status = failStatus.load();
      if (retryAfter.load()) {
        response.set_header("Retry-After", failStatus == 429 ? "1" : "0");
      }
      response.set_content(status(response.status, "TooManyRequests", "slow down").dump(),
                           "application/json");
      return;
    }
    response.set_content(R"({"kind":"Node","metadata":{"name":"n"}})", "application/json");
  };
  server.http().Get("/api/v1/nodes/n", handler);
  server.http().Post("/api/v1/nodes", handler);
  server.start();

  SECTION("429 with Retry-After, then success") {
    auto client = makeClient(server.kubeConfig());
    const auto start = Clock::now();
    auto node = client->get(resources::kNodes, "", "n");
    const auto elapsed = Clock::now() - start;
    REQUIRE(node.has_value());
    CHECK((*node)["metadata"]["name"] == "n");
    CHECK(calls == 2);
    CHECK(elapsed >= milliseconds(950));
    CHECK(elapsed < seconds(5));
    CHECK(client->requestCounts().byVerb["get"] == 1);  // one request, retried once
  }
  SECTION("503 on GET is retried with backoff") {
    failFirst = 2;
    failStatus = 503;
    retryAfter = false;
    auto node = makeClient(server.kubeConfig())->get(resources::kNodes, "", "n");
    REQUIRE(node.has_value());
    CHECK(calls == 3);
  }
  SECTION("500 on POST is not retried without Retry-After") {
    failStatus = 500;
    retryAfter = false;
    auto created = makeClient(server.kubeConfig())->create(resources::kNodes, "", json::object());
    REQUIRE_FALSE(created.has_value());
    CHECK(created.error().httpStatus == 500);
    CHECK(calls == 1);
  }
  SECTION("503 on POST with Retry-After is retried") {
    failStatus = 503;
    auto created = makeClient(server.kubeConfig())->create(resources::kNodes, "", json::object());
    REQUIRE(created.has_value());
    CHECK(calls == 2);
  }
  SECTION("retries stop at maxRetries") {
    failFirst = 100;
    failStatus = 503;
    KubeClientOptions options;
    options.maxRetries = 2;
    auto node = makeClient(server.kubeConfig(), options)->get(resources::kNodes, "", "n");
    REQUIRE_FALSE(node.has_value());
    CHECK(node.error().httpStatus == 503);
    CHECK(calls == 3);
  }
}

TEST_CASE("the client-side rate limit is observable", "[kube_client]") {
  testing::TlsTestServer server(pki());
  addEcho(server.http(), "/api/v1/nodes/n");
  server.start();
  KubeClientOptions options;
  options.qps = 20;
  options.burst = 1;
  auto limited = makeClient(server.kubeConfig(), options);
  const auto start = Clock::now();
  for (int i = 0; i < 6; ++i) {
    REQUIRE(limited->get(resources::kNodes, "", "n").has_value());
  }
  // One token at once, then one every 50ms: a floor, which load cannot break.
  const auto limitedTook = Clock::now() - start;
  CHECK(limitedTook >= milliseconds(240));

  options.qps = 1000;
  options.burst = 100;
  auto fast = makeClient(server.kubeConfig(), options);
  const auto fastStart = Clock::now();
  for (int i = 0; i < 6; ++i) {
    REQUIRE(fast->get(resources::kNodes, "", "n").has_value());
  }
  // No wall-clock ceiling (a loaded machine can be slow at anything): the same requests
  // without the wait take less than the limited ones did.
  CHECK(Clock::now() - fastStart < limitedTook);
}

TEST_CASE("list pages follow continue", "[kube_client]") {
  testing::TlsTestServer server(pki());
  Recorder recorder;
  server.http().Get("/api/v1/namespaces/default/configmaps", [&](const httplib::Request& request,
                                                                 httplib::Response& response) {
    recorder.add(request);
    const int limit = std::stoi(request.get_param_value("limit"));
    const int start =
        request.has_param("continue") ? std::stoi(request.get_param_value("continue")) : 0;
    json list = {{"kind", "ConfigMapList"},
                 {"apiVersion", "v1"},
                 {"metadata", {{"resourceVersion", start == 0 ? "100" : "101"}}},
                 {"items", json::array()}};
    for (int i = start; i < std::min(start + limit, 5); ++i) {
      list["items"].push_back({{"metadata", {{"name", "cm" + std::to_string(i)}}}});
    }
    if (start + limit < 5) {
      list["metadata"]["continue"] = std::to_string(start + limit);
    }
    response.set_content(list.dump(), "application/json");
  });
  server.start();
  auto client = makeClient(server.kubeConfig());

  ListOptions options;
  options.limit = 2;
  options.labelSelector = "app=x";
  options.resourceVersion = "50";
  auto page = client->list(resources::kConfigMaps, "default", options);
  REQUIRE(page.has_value());
  CHECK(page->items.size() == 2);
  CHECK(page->continueToken == "2");
  CHECK(page->resourceVersion == "100");
  CHECK(page->items[0]["kind"] == "ConfigMap");
  CHECK(page->items[0]["apiVersion"] == "v1");

  auto all = client->listAll(resources::kConfigMaps, "default", options);
  REQUIRE(all.has_value());
  REQUIRE(all->items.size() == 5);
  for (int i = 0; i < 5; ++i) {
    CHECK(all->items[static_cast<size_t>(i)]["metadata"]["name"] == "cm" + std::to_string(i));
  }
  CHECK(all->resourceVersion == "100");
  CHECK(all->continueToken.empty());

  auto seen = recorder.all();
  REQUIRE(seen.size() == 4);
  CHECK(param(seen[1], "continue") == "<absent>");
  CHECK(param(seen[1], "resourceVersion") == "50");
  CHECK(param(seen[2], "continue") == "2");
  CHECK(param(seen[2], "resourceVersion") == "<absent>");  // the token carries it
  CHECK(param(seen[3], "continue") == "4");
  for (const auto& s : seen) {
    CHECK(param(s, "labelSelector") == "app=x");
    CHECK(param(s, "limit") == "2");
  }
  CHECK(client->requestCounts().byVerb["list"] == 4);
}

TEST_CASE("query values are URL-encoded", "[kube_client]") {
  testing::TlsTestServer server(pki());
  Recorder recorder;
  server.http().Get("/api/v1/pods", [&](const httplib::Request& request, httplib::Response& r) {
    recorder.add(request);
    r.set_content(R"({"kind":"PodList","apiVersion":"v1","metadata":{},"items":null})",
                  "application/json");
  });
  server.start();
  ListOptions options;
  options.labelSelector = "app in (a,b),tier!=x y&z=1";
  options.fieldSelector = "spec.nodeName=n1+2";
  auto page = makeClient(server.kubeConfig())->list(resources::kPods, "", options);
  REQUIRE(page.has_value());
  CHECK(page->items.empty());
  const Seen seen = recorder.last();
  CHECK(param(seen, "labelSelector") == "app in (a,b),tier!=x y&z=1");
  CHECK(param(seen, "fieldSelector") == "spec.nodeName=n1+2");
  CHECK(seen.target.find(' ') == std::string::npos);
  CHECK(seen.target.find("%2C") != std::string::npos);
  CHECK(seen.target.find("%2B") != std::string::npos);
}

TEST_CASE("writes send the right verb, content type and query", "[kube_client]") {
  testing::TlsTestServer server(pki());
  Recorder recorder;
  auto echo = [&](const httplib::Request& request, httplib::Response& response) {
    recorder.add(request);
    response.set_content(request.body.empty() ? "{}" : request.body, "application/json");
  };
  const std::string object = R"(/api/v1/namespaces/default/pods/p(/status|/eviction)?)";
  server.http().Patch(object, echo);
  server.http().Put(object, echo);
  server.http().Delete(object, echo);
  server.http().Post(R"(/api/v1/namespaces/default/pods(/p/eviction)?)", echo);
  server.http().Get(object, echo);
  server.start();
  auto client = makeClient(server.kubeConfig());
  const KubeResource& pods = resources::kPods;

  SECTION("patch content types") {
    const std::pair<PatchType, const char*> types[] = {
        {PatchType::Merge, "application/merge-patch+json"},
        {PatchType::StrategicMerge, "application/strategic-merge-patch+json"},
        {PatchType::Json, "application/json-patch+json"},
        {PatchType::Apply, "application/apply-patch+yaml"},
    };
    for (const auto& [type, contentType] : types) {
      WriteOptions options;
      if (type == PatchType::Apply) {
        options.fieldManager = "gvirtus";
        options.force = true;
      }
      const std::string body = type == PatchType::Json
                                   ? R"([{"op":"add","path":"/metadata/labels/a","value":"b"}])"
                                   : R"({"metadata":{"labels":{"a":"b"}}})";
      auto patched = client->patch(pods, "default", "p", type, body, options);
      REQUIRE(patched.has_value());
      CHECK(*patched == json::parse(body));
      const Seen seen = recorder.last();
      CHECK(seen.method == "PATCH");
      CHECK(seen.path == "/api/v1/namespaces/default/pods/p");
      CHECK(seen.contentType == contentType);
      CHECK(seen.body == body);
      if (type == PatchType::Apply) {
        CHECK(param(seen, "fieldManager") == "gvirtus");
        CHECK(param(seen, "force") == "true");
      } else {
        CHECK(param(seen, "force") == "<absent>");
      }
      CHECK(param(seen, "dryRun") == "<absent>");
    }
    CHECK(client->requestCounts().byVerb["patch"] == 4);
  }
  SECTION("dry run and subresource") {
    WriteOptions options;
    options.dryRun = true;
    options.subresource = "status";
    options.fieldManager = "shim";
    REQUIRE(client->patch(pods, "default", "p", PatchType::Merge, "{}", options).has_value());
    const Seen seen = recorder.last();
    CHECK(seen.path == "/api/v1/namespaces/default/pods/p/status");
    CHECK(param(seen, "dryRun") == "All");
    CHECK(param(seen, "fieldManager") == "shim");
  }
  SECTION("apply needs a field manager and force needs apply") {
    auto noManager = client->patch(pods, "default", "p", PatchType::Apply, "{}");
    REQUIRE_FALSE(noManager.has_value());
    CHECK(noManager.error().message ==
          "PATCH /api/v1/namespaces/default/pods/p: server-side apply needs a field manager");
    WriteOptions force;
    force.force = true;
    CHECK_FALSE(client->patch(pods, "default", "p", PatchType::Merge, "{}", force).has_value());
    CHECK(recorder.size() == 0);
  }
  SECTION("create, update, get, delete") {
    json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}}}};
    REQUIRE(client->create(pods, "default", pod).has_value());
    CHECK(recorder.last().method == "POST");
    CHECK(recorder.last().path == "/api/v1/namespaces/default/pods");
    CHECK(recorder.last().contentType == "application/json");
    CHECK(json::parse(recorder.last().body) == pod);

    WriteOptions eviction;
    eviction.subresource = "eviction";
    REQUIRE(client->create(pods, "default", pod, eviction).has_value());
    CHECK(recorder.last().path == "/api/v1/namespaces/default/pods/p/eviction");

    REQUIRE(client->update(pods, "default", "p", pod).has_value());
    CHECK(recorder.last().method == "PUT");
    CHECK(recorder.last().path == "/api/v1/namespaces/default/pods/p");

    REQUIRE(client->get(pods, "default", "p").has_value());
    REQUIRE(client->remove(pods, "default", "p").has_value());
    CHECK(recorder.last().method == "DELETE");

    auto counts = client->requestCounts().byVerb;
    CHECK(counts["create"] == 2);
    CHECK(counts["update"] == 1);
    CHECK(counts["get"] == 1);
    CHECK(counts["delete"] == 1);
    CHECK(counts["patch"] == 0);
  }
}

// A watch body: ADDED, MODIFIED, BOOKMARK.
const std::string kWatchBody =
    R"({"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"6"}}})"
    "\n"
    R"({"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"7"}}})"
    "\n"
    R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"9"}}})"
    "\n";

// Serves `body` in chunks of `chunk` bytes, then ends the response.
void serveChunked(httplib::Response& response, std::string body, size_t chunk) {
  response.set_chunked_content_provider(
      "application/json",
      [body = std::move(body), chunk, offset = size_t{0}](size_t, httplib::DataSink& sink) mutable {
        if (offset >= body.size()) {
          sink.done();
          return true;
        }
        const size_t n = std::min(chunk, body.size() - offset);
        if (!sink.write(body.data() + offset, n)) {
          return false;
        }
        offset += n;
        return true;
      });
}

TEST_CASE("watch streams events", "[kube_client]") {
  testing::TlsTestServer server(pki());
  Recorder recorder;
  std::atomic<size_t> chunk{5};
  server.http().Get("/api/v1/namespaces/default/pods",
                    [&](const httplib::Request& request, httplib::Response& response) {
                      recorder.add(request);
                      serveChunked(response, kWatchBody, chunk.load());
                    });
  server.start();
  auto client = makeClient(server.kubeConfig());

  for (size_t size : {size_t{1}, size_t{5}, size_t{64}, size_t{4096}}) {
    chunk = size;
    std::vector<WatchEvent> events;
    WatchOptions options;
    options.resourceVersion = "5";
    options.labelSelector = "gvirtus.io/enabled=true";
    auto result = client->watch(resources::kPods, "default", options, [&](const WatchEvent& e) {
      events.push_back(e);
      return true;
    });
    INFO("chunk size " << size);
    REQUIRE(result.has_value());
    REQUIRE(events.size() == 3);
    CHECK(events[0].type == "ADDED");
    CHECK(events[0].object["metadata"]["resourceVersion"] == "6");
    CHECK(events[1].type == "MODIFIED");
    CHECK(events[2].type == "BOOKMARK");
    CHECK(events[2].object["metadata"]["resourceVersion"] == "9");
  }
  const Seen seen = recorder.last();
  CHECK(param(seen, "watch") == "1");
  CHECK(param(seen, "resourceVersion") == "5");
  CHECK(param(seen, "allowWatchBookmarks") == "true");
  CHECK(param(seen, "labelSelector") == "gvirtus.io/enabled=true");
  const int timeout = std::stoi(param(seen, "timeoutSeconds"));
  CHECK(timeout >= 300);
  CHECK(timeout <= 600);

  SECTION("options are passed through") {
    WatchOptions options;
    options.timeoutSeconds = 7;
    options.allowBookmarks = false;
    REQUIRE(client->watch(resources::kPods, "default", options,
                          [](const WatchEvent&) { return true; }));
    CHECK(param(recorder.last(), "timeoutSeconds") == "7");
    CHECK(param(recorder.last(), "allowWatchBookmarks") == "<absent>");
    CHECK(param(recorder.last(), "resourceVersion") == "<absent>");
  }
  SECTION("onEvent returning false ends the watch") {
    int count = 0;
    auto result = client->watch(resources::kPods, "default", {}, [&](const WatchEvent&) {
      ++count;
      return false;
    });
    CHECK(result.has_value());
    CHECK(count == 1);
  }
  CHECK(client->requestCounts().byVerb["watch"] >= 4);
}

TEST_CASE("watch reports 410 from the HTTP status and from an ERROR event", "[kube_client]") {
  testing::TlsTestServer server(pki());
  server.http().Get("/api/v1/pods", [](const httplib::Request& request,
                                       httplib::Response& response) {
    const std::string rv = request.get_param_value("resourceVersion");
    if (rv == "1") {
      response.status = 410;
      response.set_content(status(410, "Expired", "too old resource version: 1 (50)").dump(),
                           "application/json");
      return;
    }
    if (rv == "2") {
      serveChunked(
          response,
          R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})"
          "\n"
          R"json({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 2 (50)","reason":"Expired","code":410}})json"
          "\n",
          16);
      return;
    }
    serveChunked(response, "{\"type\":\"ADDED\",\n", 100);
  });
  server.start();
  auto client = makeClient(server.kubeConfig());

  WatchOptions options;
  int events = 0;
  auto count = [&](const WatchEvent&) {
    ++events;
    return true;
  };
  options.resourceVersion = "1";
  auto viaStatus = client->watch(resources::kPods, "", options, count);
  REQUIRE_FALSE(viaStatus.has_value());
  CHECK(viaStatus.error().isGone());
  CHECK(viaStatus.error().reason == "Expired");
  CHECK(viaStatus.error().message ==
        "GET /api/v1/pods (watch): 410 Expired: too old resource version: 1 (50)");
  CHECK(events == 0);

  options.resourceVersion = "2";
  auto viaEvent = client->watch(resources::kPods, "", options, count);
  REQUIRE_FALSE(viaEvent.has_value());
  CHECK(viaEvent.error().isGone());
  CHECK(viaEvent.error().reason == "Expired");
  CHECK(viaEvent.error().message.find("too old resource version: 2 (50)") != std::string::npos);
  CHECK(events == 1);

  options.resourceVersion = "3";
  auto corrupt = client->watch(resources::kPods, "", options, count);
  REQUIRE_FALSE(corrupt.has_value());
  CHECK(corrupt.error().message.starts_with("GET /api/v1/pods (watch): watch event is not JSON"));
}

TEST_CASE("watch cancellation through the stop token returns promptly", "[kube_client]") {
  testing::TlsTestServer server(pki());
  std::atomic<int> active{0};
  std::atomic<bool> release{false};
  server.http().Get("/api/v1/pods", [&](const httplib::Request&, httplib::Response& response) {
    // Sends headers, then nothing: the client blocks reading the body.
    response.set_chunked_content_provider("application/json", [&](size_t, httplib::DataSink&) {
      ++active;
      const auto start = Clock::now();
      while (!release && !server.stopping() && Clock::now() - start < seconds(3)) {
        std::this_thread::sleep_for(milliseconds(5));
      }
      --active;
      return false;
    });
  });
  server.start();
  auto client = makeClient(server.kubeConfig());
  auto noEvents = [](const WatchEvent&) { return true; };

  SECTION("while blocked in a read") {
    std::stop_source stop;
    Result<void> result = fail("not run");
    std::thread watcher(
        [&] { result = client->watch(resources::kPods, "", {}, noEvents, stop.get_token()); });
    REQUIRE(eventually([&] { return active == 1; }, seconds(5)));
    std::this_thread::sleep_for(milliseconds(100));
    const auto stopAt = Clock::now();
    stop.request_stop();
    watcher.join();
    CHECK(Clock::now() - stopAt < milliseconds(1000));
    CHECK(result.has_value());
  }
  SECTION("already stopped") {
    std::stop_source stop;
    stop.request_stop();
    const auto start = Clock::now();
    CHECK(client->watch(resources::kPods, "", {}, noEvents, stop.get_token()).has_value());
    CHECK(Clock::now() - start < milliseconds(100));
  }
  SECTION("stopped at any moment of the request") {
    std::mt19937 random(42);
    for (int i = 0; i < 12; ++i) {
      std::stop_source stop;
      Result<void> result = fail("not run");
      std::thread watcher(
          [&] { result = client->watch(resources::kPods, "", {}, noEvents, stop.get_token()); });
      std::this_thread::sleep_for(
          std::chrono::microseconds(std::uniform_int_distribution<int>(0, 20000)(random)));
      const auto stopAt = Clock::now();
      stop.request_stop();
      watcher.join();
      INFO("iteration " << i);
      CHECK(Clock::now() - stopAt < milliseconds(1500));
      CHECK(result.has_value());
      // Let the server's handler go before the next round.
      release = true;
      const auto drainStart = Clock::now();
      while (active > 0 && Clock::now() - drainStart < seconds(4)) {
        std::this_thread::sleep_for(milliseconds(2));
      }
      release = false;
    }
  }
  release = true;
}

TEST_CASE("plain http servers and path prefixes work", "[kube_client]") {
  httplib::Server server;
  server.set_keep_alive_timeout(1);
  server.Get("/prefix/api/v1/nodes/n", [](const httplib::Request& request,
                                          httplib::Response& response) {
    response.set_content(json{{"authorization", request.get_header_value("Authorization")}}.dump(),
                         "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread loop([&] { server.listen_after_bind(); });
  while (!server.is_running()) {
    std::this_thread::sleep_for(milliseconds(1));  // stop() is a no-op before the loop runs
  }
  {
    KubeConfig config;
    config.server = "http://127.0.0.1:" + std::to_string(port) + "/prefix/";
    config.token = "plain";
    auto client = makeClient(config);
    auto node = client->get(resources::kNodes, "", "n");
    REQUIRE(node.has_value());
    CHECK((*node)["authorization"] == "Bearer plain");
  }
  server.stop();
  loop.join();

  // Nothing listens there any more.
  KubeConfig gone;
  gone.server = "http://127.0.0.1:" + std::to_string(port);
  KubeClientOptions options;
  options.maxRetries = 0;
  auto refused = makeClient(gone, options)->get(resources::kNodes, "", "n");
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().message ==
        "GET /api/v1/nodes/n: cannot connect to http://127.0.0.1:" + std::to_string(port));

  // A refused connection reached nothing, so any verb is retried, with backoff.
  options.maxRetries = 2;
  const auto start = Clock::now();
  auto retried = makeClient(gone, options)->create(resources::kNodes, "", json::object());
  REQUIRE_FALSE(retried.has_value());
  CHECK(Clock::now() - start >= milliseconds(550));  // 250ms and 500ms, less 20% jitter
}

TEST_CASE("a cancelled client ends requests in flight, retry waits and new requests at once",
          "[kube_client]") {
  testing::BlackHole hole;  // connections accepted by the kernel, never answered
  testing::TlsTestServer server(pki());
  KubeConfig config = server.kubeConfig();
  config.server = "https://127.0.0.1:" + std::to_string(hole.port());
  server.http().Get("/api/v1/nodes/busy", [](const httplib::Request&, httplib::Response& r) {
    r.status = 503;
    r.set_header("Retry-After", "30");
    r.set_content("{}", "application/json");
  });
  server.start();

  // A request, cancelled after `after`; returns how long it took from the cancel.
  auto cancelledAfter = [](KubeConfig kubeConfig, milliseconds after) {
    std::stop_source cancel;
    KubeClientOptions options;
    options.requestTimeout = seconds(30);
    options.cancel = cancel.get_token();
    auto client = makeClient(std::move(kubeConfig), options);
    Result<json> result = fail("not run");
    std::thread caller([&] { result = client->get(resources::kNodes, "", "busy"); });
    std::this_thread::sleep_for(after);
    const auto cancelAt = Clock::now();
    cancel.request_stop();
    caller.join();
    const auto took = Clock::now() - cancelAt;
    REQUIRE_FALSE(result.has_value());
    CHECK_THAT(result.error().message, Catch::Contains("cancelled"));
    // And a new request fails at once.
    const auto again = Clock::now();
    CHECK_FALSE(client->get(resources::kNodes, "", "busy").has_value());
    CHECK(Clock::now() - again < milliseconds(100));
    return took;
  };
  SECTION("in flight to a server that never answers") {
    CHECK(cancelledAfter(config, milliseconds(300)) < milliseconds(500));
  }
  SECTION("while waiting 30 s to retry a 503") {
    CHECK(cancelledAfter(server.kubeConfig(), milliseconds(300)) < milliseconds(500));
  }
}

TEST_CASE("a kept-alive connection idle past maxIdle is not reused", "[kube_client]") {
  // Servers drop idle connections, and a POST (not retried: not idempotent) sent on a
  // dropped one would fail. Each connection is told by its client port.
  testing::TlsTestServer server(pki());
  std::mutex mutex;
  std::vector<int> ports;
  server.http().Post("/api/v1/nodes", [&](const httplib::Request& req, httplib::Response& r) {
    std::lock_guard lock(mutex);
    ports.push_back(req.remote_port);
    r.set_content(R"({"kind":"Node","metadata":{"name":"n"}})", "application/json");
  });
  server.start();
  testing::ManualClock clock;
  KubeClientOptions options;
  options.maxIdle = milliseconds(500);
  options.clock = &clock;
  auto client = makeClient(server.kubeConfig(), options);
  auto post = [&] {
    auto created = client->create(resources::kNodes, "", json{{"kind", "Node"}});
    REQUIRE(created.has_value());
  };
  post();
  clock.advance(milliseconds(499));
  post();  // idle for less than maxIdle: the same connection
  clock.advance(milliseconds(500));
  post();  // idle for maxIdle: a new one
  clock.advance(milliseconds(900));
  post();
  std::lock_guard lock(mutex);
  REQUIRE(ports.size() == 4);
  CHECK(ports[1] == ports[0]);
  CHECK(ports[2] != ports[1]);
  CHECK(ports[3] != ports[2]);
}

TEST_CASE("a request that times out is not retried", "[kube_client]") {
  testing::TlsTestServer server(pki());
  std::atomic<int> calls{0};
  server.http().Get("/api/v1/nodes/slow", [&](const httplib::Request&, httplib::Response& r) {
    ++calls;
    std::this_thread::sleep_for(milliseconds(1500));
    r.set_content("{}", "application/json");
  });
  server.start();
  KubeClientOptions options;
  options.requestTimeout = seconds(1);
  options.maxRetries = 3;
  const auto start = Clock::now();
  auto result = makeClient(server.kubeConfig(), options)->get(resources::kNodes, "", "slow");
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().message ==
        "GET /api/v1/nodes/slow: connection lost or timed out while reading the response");
  CHECK(calls == 1);
  CHECK(Clock::now() - start < milliseconds(1400));
}

TEST_CASE("the client is safe to share between threads", "[kube_client]") {
  testing::TlsTestServer server(pki());
  addEcho(server.http(), R"(/api/v1/nodes/n\d+)");
  server.start();
  KubeClientOptions options;
  options.qps = 0;
  auto client = makeClient(server.kubeConfig(), options);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 15; ++i) {
        if (client->get(resources::kNodes, "", "n" + std::to_string(t * 100 + i))) {
          ++ok;
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  CHECK(ok == 90);
  CHECK(client->requestCounts().byVerb["get"] == 90);
}

TEST_CASE("the API server's warnings are logged once each", "[kube_client]") {
  testing::TlsTestServer server(pki());
  server.http().Get("/api/v1/namespaces/default/pods/x", [](const httplib::Request&,
                                                            httplib::Response& response) {
    response.set_header("Warning", "299 - \"v1 Endpoints is deprecated in v1.33+\"");
    response.set_header("Warning", "299 - \"unknown field \\\"spec.x\\\"\"");
    response.set_content(R"({"kind":"Pod"})", "application/json");
  });
  server.start();
  auto client = makeClient(server.kubeConfig(), {});

  // The logger writes to stderr: read what it wrote across three requests.
  std::FILE* captured = std::tmpfile();
  REQUIRE(captured != nullptr);
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(::fileno(captured), STDERR_FILENO);
  for (int i = 0; i < 3; ++i) {
    CHECK(client->get(resources::kPods, "default", "x").has_value());
  }
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string lines;
  std::rewind(captured);
  for (int c = std::fgetc(captured); c != EOF; c = std::fgetc(captured)) {
    lines.push_back(static_cast<char>(c));
  }
  std::fclose(captured);

  auto occurrences = [&](std::string_view needle) {
    size_t n = 0;
    for (size_t at = lines.find(needle); at != std::string::npos; at = lines.find(needle, at + 1)) {
      ++n;
    }
    return n;
  };
  CHECK(occurrences("the API server warns") == 2);
  CHECK(occurrences("v1 Endpoints is deprecated") == 1);
  CHECK(occurrences("unknown field") == 1);
}

}  // namespace
}  // namespace gvirtus
