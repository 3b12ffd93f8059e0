#include "common/kube/access/config.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>

#include "support/tls_test_server.h"

namespace gvirtus {
namespace {

namespace fs = std::filesystem;

// A fresh folder under the system temp dir, removed with its contents.
class ScratchDir {
 public:
  ScratchDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            ("kube-config-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const fs::path& path() const { return path_; }
  std::string write(const std::string& name, const std::string& contents) const {
    fs::path file = path_ / name;
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << contents;
    return file.string();
  }

 private:
  fs::path path_;
};

std::string base64(const std::string& data) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(data[i]) << 16) |
                       (static_cast<unsigned char>(data[i + 1]) << 8) |
                       static_cast<unsigned char>(data[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i + 1 == data.size()) {
    const unsigned v = static_cast<unsigned char>(data[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == data.size()) {
    const unsigned v = (static_cast<unsigned char>(data[i]) << 16) |
                       (static_cast<unsigned char>(data[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

const testing::TestPki& pki() {
  static const testing::TestPki value = testing::makeTestPki("kubeconfig-test-ca");
  return value;
}

// A kubeconfig with two contexts: "main" (current, cluster "c", user "u") and "other".
std::string kubeconfig(const std::string& cluster, const std::string& user,
                       const std::string& current = "main") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: " + current +
         "\n"
         "contexts:\n"
         "- name: main\n  context: {cluster: c, user: u, namespace: default}\n"
         "- name: other\n  context: {cluster: c2, user: u2}\n"
         "clusters:\n"
         "- name: c\n  cluster:\n" +
         cluster +
         "- name: c2\n  cluster:\n    server: https://other.example:8443\n"
         "    insecure-skip-tls-verify: true\n"
         "    tls-server-name: api.other.example\n"
         "users:\n"
         "- name: u\n  user:\n" +
         user + "- name: u2\n  user:\n    token: other-token\n";
}

std::string inlineCluster() {
  return "    server: https://127.0.0.1:6443\n    certificate-authority-data: " +
         base64(pki().ca.certPem) + "\n";
}

void checkOneLine(const Error& error) {
  INFO(error.message);
  CHECK(error.message.find('\n') == std::string::npos);
  CHECK(error.message.starts_with("kubeconfig "));
}

TEST_CASE("kubeconfig with inline data", "[kube_config]") {
  ScratchDir dir;
  const std::string path = dir.write(
      "config", kubeconfig(inlineCluster(),
                           "    client-certificate-data: " + base64(pki().client.certPem) +
                               "\n    client-key-data: " + base64(pki().client.keyPem) + "\n"));
  auto config = loadKubeconfigFile(path);
  REQUIRE(config.has_value());
  CHECK(config->server == "https://127.0.0.1:6443");
  CHECK(config->caPem == pki().ca.certPem);
  CHECK(config->clientCertPem == pki().client.certPem);
  CHECK(config->clientKeyPem == pki().client.keyPem);
  CHECK_FALSE(config->insecureSkipTlsVerify);
  CHECK(config->token.empty());
  CHECK(config->tokenFile.empty());
}

TEST_CASE("kubeconfig with base64 wrapped over lines", "[kube_config]") {
  ScratchDir dir;
  std::string wrapped = base64(pki().ca.certPem);
  for (size_t i = 64; i < wrapped.size(); i += 65) {
    wrapped.insert(i, "\n      ");
  }
  const std::string path = dir.write(
      "config", kubeconfig("    server: https://127.0.0.1:6443\n    certificate-authority-data: |\n"
                           "      " +
                               wrapped + "\n",
                           "    token: abc\n"));
  auto config = loadKubeconfigFile(path);
  REQUIRE(config.has_value());
  CHECK(config->caPem == pki().ca.certPem);
}

TEST_CASE("kubeconfig with file references relative to its folder", "[kube_config]") {
  ScratchDir dir;
  dir.write("ca.crt", pki().ca.certPem);
  dir.write("certs/client.crt", pki().client.certPem);
  const std::string keyPath = dir.write("client.key", pki().client.keyPem);
  const std::string path = dir.write(
      "kube/config",
      kubeconfig("    server: https://127.0.0.1:6443\n    certificate-authority: ../ca.crt\n",
                 "    client-certificate: ../certs/client.crt\n    client-key: " + keyPath + "\n"));
  auto config = loadKubeconfigFile(path);
  REQUIRE(config.has_value());
  CHECK(config->caPem == pki().ca.certPem);
  CHECK(config->clientCertPem == pki().client.certPem);
  CHECK(config->clientKeyPem == pki().client.keyPem);
}

TEST_CASE("kubeconfig with a token and with a token file", "[kube_config]") {
  ScratchDir dir;
  SECTION("token") {
    const std::string path =
        dir.write("config", kubeconfig(inlineCluster(), "    token: \"s3cr3t\"\n"));
    auto config = loadKubeconfigFile(path);
    REQUIRE(config.has_value());
    CHECK(config->token == "s3cr3t");
    CHECK(config->tokenFile.empty());
    CHECK(config->clientCertPem.empty());
  }
  SECTION("tokenFile") {
    dir.write("secrets/token", "file-token\n");
    const std::string path =
        dir.write("config", kubeconfig(inlineCluster(), "    tokenFile: secrets/token\n"));
    auto config = loadKubeconfigFile(path);
    REQUIRE(config.has_value());
    CHECK(fs::equivalent(config->tokenFile, dir.path() / "secrets/token"));
  }
}

TEST_CASE("kubeconfig insecure cluster and a chosen context", "[kube_config]") {
  ScratchDir dir;
  const std::string path = dir.write("config", kubeconfig(inlineCluster(), "    token: a\n"));
  auto config = loadKubeconfigFile(path, "other");
  REQUIRE(config.has_value());
  CHECK(config->server == "https://other.example:8443");
  CHECK(config->insecureSkipTlsVerify);
  CHECK(config->tlsServerName == "api.other.example");
  CHECK(config->token == "other-token");
  CHECK(config->caPem.empty());

  // The same file without a context argument uses current-context.
  auto current = loadKubeconfigFile(path);
  REQUIRE(current.has_value());
  CHECK(current->server == "https://127.0.0.1:6443");
  CHECK(current->token == "a");

  // A current-context that points to "other".
  const std::string other =
      dir.write("config2", kubeconfig(inlineCluster(), "    token: a\n", "other"));
  auto viaCurrent = loadKubeconfigFile(other);
  REQUIRE(viaCurrent.has_value());
  CHECK(viaCurrent->server == "https://other.example:8443");
}

TEST_CASE("kubeconfig errors are one line naming the problem", "[kube_config]") {
  ScratchDir dir;
  const std::string goodUser = "    token: a\n";

  SECTION("missing file") {
    const std::string path = (dir.path() / "nope.yaml").string();
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    checkOneLine(r.error());
    CHECK(r.error().message == "kubeconfig " + path + ": No such file or directory");
  }
  SECTION("unknown context") {
    const std::string path = dir.write("config", kubeconfig(inlineCluster(), goodUser));
    auto r = loadKubeconfigFile(path, "staging");
    REQUIRE_FALSE(r.has_value());
    checkOneLine(r.error());
    CHECK(r.error().message == "kubeconfig " + path + ": context \"staging\" not found");
  }
  SECTION("unknown current context") {
    const std::string path = dir.write("config", kubeconfig(inlineCluster(), goodUser, "gone"));
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message == "kubeconfig " + path + ": context \"gone\" not found");
  }
  SECTION("no current context") {
    const std::string path = dir.write("config", kubeconfig(inlineCluster(), goodUser, "\"\""));
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message ==
          "kubeconfig " + path + ": no current-context set and no context given");
  }
  SECTION("unknown cluster and user") {
    const std::string path = dir.write(
        "config",
        "current-context: x\ncontexts:\n- name: x\n  context: {cluster: nowhere, user: nobody}\n"
        "- name: y\n  context: {cluster: c, user: nobody}\n"
        "clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n");
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    checkOneLine(r.error());
    CHECK(r.error().message ==
          "kubeconfig " + path + ": context \"x\": cluster \"nowhere\" not found");
    auto u = loadKubeconfigFile(path, "y");
    REQUIRE_FALSE(u.has_value());
    CHECK(u.error().message == "kubeconfig " + path + ": context \"y\": user \"nobody\" not found");
  }
  SECTION("bad base64") {
    const std::string path =
        dir.write("config", kubeconfig("    server: https://127.0.0.1:6443\n"
                                       "    certificate-authority-data: bm90IGJhc2U2NC!!\n",
                                       goodUser));
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    checkOneLine(r.error());
    CHECK(r.error().message ==
          "kubeconfig " + path + ": cluster \"c\": certificate-authority-data: bad base64");
  }
  SECTION("bad base64 padding") {
    const std::string path = dir.write("config", kubeconfig(inlineCluster(),
                                                            "    client-certificate-data: QQ=A\n"
                                                            "    client-key-data: QUJD\n"));
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message ==
          "kubeconfig " + path + ": user \"u\": client-certificate-data: bad base64");
  }
  SECTION("missing referenced file") {
    const std::string path = dir.write(
        "config",
        kubeconfig("    server: https://127.0.0.1:6443\n    certificate-authority: ca.crt\n",
                   goodUser));
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    checkOneLine(r.error());
    CHECK(r.error().message == "kubeconfig " + path + ": cluster \"c\": certificate-authority: " +
                                   (dir.path() / "ca.crt").string() +
                                   ": No such file or directory");
  }
  SECTION("CA that is not PEM") {
    const std::string path = dir.write("config", kubeconfig("    server: https://127.0.0.1:6443\n"
                                                            "    certificate-authority-data: " +
                                                                base64("hello") + "\n",
                                                            goodUser));
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message == "kubeconfig " + path +
                                   ": cluster \"c\": certificate-authority: no PEM certificate "
                                   "found");
  }
  SECTION("garbage key") {
    const std::string path = dir.write(
        "config",
        kubeconfig(inlineCluster(), "    client-certificate-data: " + base64(pki().client.certPem) +
                                        "\n    client-key-data: " + base64("garbage") + "\n"));
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    checkOneLine(r.error());
    CHECK(r.error().message ==
          "kubeconfig " + path + ": user \"u\": client-key: no PEM private key found");
  }
  SECTION("corrupt PEM key") {
    std::string key = pki().client.keyPem;
    key.replace(40, 10, "**********");
    const std::string path = dir.write(
        "config",
        kubeconfig(inlineCluster(), "    client-certificate-data: " + base64(pki().client.certPem) +
                                        "\n    client-key-data: " + base64(key) + "\n"));
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    checkOneLine(r.error());
    CHECK(r.error().message.starts_with("kubeconfig " + path +
                                        ": user \"u\": client-key: bad PEM private key"));
  }
  SECTION("unreadable key") {
    fs::create_directories(dir.path() / "key-is-a-folder");
    const std::string path = dir.write(
        "config",
        kubeconfig(inlineCluster(), "    client-certificate-data: " + base64(pki().client.certPem) +
                                        "\n    client-key: key-is-a-folder\n"));
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    checkOneLine(r.error());
    CHECK(r.error().message == "kubeconfig " + path + ": user \"u\": client-key: " +
                                   (dir.path() / "key-is-a-folder").string() + ": Is a directory");
  }
  SECTION("certificate without key") {
    const std::string path =
        dir.write("config", kubeconfig(inlineCluster(), "    client-certificate-data: " +
                                                            base64(pki().client.certPem) + "\n"));
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message ==
          "kubeconfig " + path + ": user \"u\": client-certificate without client-key");
  }
  SECTION("missing token file") {
    const std::string path =
        dir.write("config", kubeconfig(inlineCluster(), "    tokenFile: /nonexistent/token\n"));
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message == "kubeconfig " + path +
                                   ": user \"u\": tokenFile: /nonexistent/token: No such file or "
                                   "directory");
  }
  SECTION("exec plugins") {
    const std::string path =
        dir.write("config", kubeconfig(inlineCluster(),
                                       "    exec:\n      command: aws\n"
                                       "      apiVersion: client.authentication.k8s.io/v1\n"));
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message ==
          "kubeconfig " + path + ": user \"u\": exec credential plugins are not supported");
  }
  SECTION("no server") {
    const std::string path = dir.write(
        "config",
        kubeconfig("    certificate-authority-data: " + base64(pki().ca.certPem) + "\n", goodUser));
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message == "kubeconfig " + path + ": cluster \"c\": no server");
  }
  SECTION("invalid YAML") {
    const std::string path = dir.write("config", "clusters: [\n  - {name: x\n");
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    checkOneLine(r.error());
    CHECK(r.error().message.starts_with("kubeconfig " + path + ": invalid YAML: "));
  }
  SECTION("not a map") {
    const std::string path = dir.write("config", "- just\n- a list\n");
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message == "kubeconfig " + path + ": not a kubeconfig (expected a YAML map)");
  }
  SECTION("insecure flag that is not a boolean") {
    const std::string path =
        dir.write("config", kubeconfig("    server: https://x:1\n"
                                       "    insecure-skip-tls-verify: perhaps\n",
                                       goodUser));
    auto r = loadKubeconfigFile(path);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message ==
          "kubeconfig " + path + ": cluster \"c\": insecure-skip-tls-verify: not a boolean");
  }
}

// Sets or unsets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
    }
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST_CASE("in-cluster configuration", "[kube_config]") {
  ScratchDir account;
  account.write("token", "sa-token\n");
  account.write("ca.crt", pki().ca.certPem);

  SECTION("IPv4") {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
    ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
    auto config = loadInClusterConfig(account.path().string());
    REQUIRE(config.has_value());
    CHECK(config->server == "https://10.96.0.1:443");
    CHECK(config->token == "sa-token");
    CHECK(config->tokenFile == (account.path() / "token").string());
    CHECK(config->caPem == pki().ca.certPem);
  }
  SECTION("IPv6 host gets brackets") {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", "fd00:10:96::1");
    ScopedEnv port("KUBERNETES_SERVICE_PORT", "6443");
    auto config = loadInClusterConfig(account.path().string());
    REQUIRE(config.has_value());
    CHECK(config->server == "https://[fd00:10:96::1]:6443");
  }
  SECTION("outside a pod") {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);
    ScopedEnv port("KUBERNETES_SERVICE_PORT", nullptr);
    auto config = loadInClusterConfig(account.path().string());
    REQUIRE_FALSE(config.has_value());
    CHECK(config.error().message.find("KUBERNETES_SERVICE_HOST") != std::string::npos);
    CHECK(config.error().message.find("--kubeconfig") != std::string::npos);
    // loadKubeConfig without a path is in-cluster.
    auto viaDefault = loadKubeConfig("");
    REQUIRE_FALSE(viaDefault.has_value());
    CHECK(viaDefault.error().message == config.error().message);
  }
  SECTION("missing token") {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
    ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
    ScratchDir empty;
    auto config = loadInClusterConfig(empty.path().string());
    REQUIRE_FALSE(config.has_value());
    CHECK(config.error().message == "service account token: " + (empty.path() / "token").string() +
                                        ": No such file or directory");
  }
}

TEST_CASE("loadKubeConfig with a path reads the file", "[kube_config]") {
  ScratchDir dir;
  const std::string path = dir.write("config", kubeconfig(inlineCluster(), "    token: t\n"));
  auto config = loadKubeConfig(path);
  REQUIRE(config.has_value());
  CHECK(config->token == "t");
}

}  // namespace
}  // namespace gvirtus
