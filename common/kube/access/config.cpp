#include "common/kube/access/config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "common/base/base64.h"
#include "common/base/strings.h"
#include "common/tls/certificates.h"

namespace gvirtus {
namespace {

namespace fs = std::filesystem;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// The whole file, or "PATH: reason" naming what the OS said.
Result<std::string> readFile(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    return fail(path + ": " + std::strerror(errno));
  }
  std::string data;
  char buffer[16384];
  while (true) {
    size_t n = std::fread(buffer, 1, sizeof buffer, file.get());
    data.append(buffer, n);
    if (n < sizeof buffer) {
      if (std::ferror(file.get()) != 0) {
        return fail(path + ": " + std::strerror(errno));
      }
      break;
    }
  }
  return data;
}

// A scalar field of a map; empty when absent or null.
Result<std::string> scalar(const YAML::Node& map, const char* key) {
  if (!map || !map.IsMap()) {
    return std::string();
  }
  YAML::Node node = map[key];
  if (!node || node.IsNull()) {
    return std::string();
  }
  if (!node.IsScalar()) {
    return fail(std::string(key) + ": not a string");
  }
  return node.as<std::string>();
}

// The `field` map of the entry named `name` in the list `listKey` (clusters, users, contexts).
std::optional<YAML::Node> findNamed(const YAML::Node& root, const char* listKey, const char* field,
                                    const std::string& name) {
  YAML::Node list = root[listKey];
  if (!list || !list.IsSequence()) {
    return std::nullopt;
  }
  for (const auto& entry : list) {
    if (!entry.IsMap()) {
      continue;
    }
    YAML::Node entryName = entry["name"];
    if (entryName && entryName.IsScalar() && entryName.as<std::string>() == name) {
      YAML::Node value = entry[field];
      return value ? value : YAML::Node(YAML::NodeType::Map);
    }
  }
  return std::nullopt;
}

// PEM material from `key`-data (base64) or from the file `key` (relative to `dir`).
Result<std::string> material(const YAML::Node& map, const std::string& key, const fs::path& dir) {
  auto data = scalar(map, (key + "-data").c_str());
  if (!data) {
    return fail(data.error());
  }
  if (!data->empty()) {
    auto decoded = base64Decode(*data);
    if (!decoded) {
      return fail(key + "-data: bad base64");
    }
    return *decoded;
  }
  auto file = scalar(map, key.c_str());
  if (!file) {
    return fail(file.error());
  }
  if (file->empty()) {
    return std::string();
  }
  fs::path path(*file);
  if (path.is_relative()) {
    path = dir / path;
  }
  auto contents = readFile(path.string());
  if (!contents) {
    return fail(contents.error().context(key));
  }
  return *contents;
}

Result<void> loadCluster(const YAML::Node& cluster, const fs::path& dir, KubeConfig& config) {
  auto server = scalar(cluster, "server");
  if (!server) {
    return fail(server.error());
  }
  if (server->empty()) {
    return fail("no server");
  }
  if (!server->starts_with("https://") && !server->starts_with("http://")) {
    return fail("server \"" + *server + "\" is not an http(s) URL");
  }
  config.server = *server;
  auto tlsServerName = scalar(cluster, "tls-server-name");
  if (!tlsServerName) {
    return fail(tlsServerName.error());
  }
  config.tlsServerName = *tlsServerName;
  YAML::Node insecure = cluster["insecure-skip-tls-verify"];
  if (insecure && !insecure.IsNull()) {
    bool value = false;
    if (!insecure.IsScalar() || !YAML::convert<bool>::decode(insecure, value)) {
      return fail("insecure-skip-tls-verify: not a boolean");
    }
    config.insecureSkipTlsVerify = value;
  }
  auto ca = material(cluster, "certificate-authority", dir);
  if (!ca) {
    return fail(ca.error());
  }
  if (!ca->empty()) {
    if (auto valid = validateCertificatePem(*ca); !valid) {
      return fail(valid.error().context("certificate-authority"));
    }
  }
  config.caPem = std::move(*ca);
  return {};
}

Result<void> loadUser(const YAML::Node& user, const fs::path& dir, KubeConfig& config) {
  if (user["exec"]) {
    return fail("exec credential plugins are not supported");
  }
  if (user["auth-provider"]) {
    return fail("auth-provider plugins are not supported");
  }
  auto cert = material(user, "client-certificate", dir);
  if (!cert) {
    return fail(cert.error());
  }
  auto key = material(user, "client-key", dir);
  if (!key) {
    return fail(key.error());
  }
  if (cert->empty() != key->empty()) {
    return fail(cert->empty() ? "client-key without client-certificate"
                              : "client-certificate without client-key");
  }
  if (!cert->empty()) {
    if (auto valid = validateCertificatePem(*cert); !valid) {
      return fail(valid.error().context("client-certificate"));
    }
    if (auto valid = validatePrivateKeyPem(*key); !valid) {
      return fail(valid.error().context("client-key"));
    }
  }
  config.clientCertPem = std::move(*cert);
  config.clientKeyPem = std::move(*key);

  auto token = scalar(user, "token");
  if (!token) {
    return fail(token.error());
  }
  config.token = std::string(trim(*token));
  auto tokenFile = scalar(user, "tokenFile");
  if (!tokenFile) {
    return fail(tokenFile.error());
  }
  if (!tokenFile->empty()) {
    fs::path path(*tokenFile);
    if (path.is_relative()) {
      path = dir / path;
    }
    // Read now so that a wrong path fails at start-up, not at the first request.
    auto contents = readFile(path.string());
    if (!contents) {
      return fail(contents.error().context("tokenFile"));
    }
    config.tokenFile = path.string();
  }
  YAML::Node username = user["username"];
  if (username && !username.IsNull() && config.token.empty() && config.tokenFile.empty() &&
      config.clientCertPem.empty()) {
    return fail("basic authentication (username/password) is not supported");
  }
  return {};
}

Result<KubeConfig> parseKubeconfig(const YAML::Node& root, const fs::path& dir,
                                   const std::string& requestedContext) {
  if (!root || !root.IsMap()) {
    return fail("not a kubeconfig (expected a YAML map)");
  }
  std::string contextName = requestedContext;
  if (contextName.empty()) {
    auto current = scalar(root, "current-context");
    if (!current) {
      return fail(current.error());
    }
    if (current->empty()) {
      return fail("no current-context set and no context given");
    }
    contextName = *current;
  }
  auto context = findNamed(root, "contexts", "context", contextName);
  if (!context) {
    return fail("context \"" + contextName + "\" not found");
  }
  auto clusterName = scalar(*context, "cluster");
  auto userName = scalar(*context, "user");
  if (!clusterName || !userName) {
    return fail((!clusterName ? clusterName.error() : userName.error())
                    .context("context \"" + contextName + "\""));
  }
  if (clusterName->empty()) {
    return fail("context \"" + contextName + "\" names no cluster");
  }
  auto cluster = findNamed(root, "clusters", "cluster", *clusterName);
  if (!cluster) {
    return fail("context \"" + contextName + "\": cluster \"" + *clusterName + "\" not found");
  }
  KubeConfig config;
  if (auto ns = scalar(*context, "namespace"); ns) {
    config.ns = *ns;
  }
  if (auto r = loadCluster(*cluster, dir, config); !r) {
    return fail(r.error().context("cluster \"" + *clusterName + "\""));
  }
  if (!userName->empty()) {
    auto user = findNamed(root, "users", "user", *userName);
    if (!user) {
      return fail("context \"" + contextName + "\": user \"" + *userName + "\" not found");
    }
    if (auto r = loadUser(*user, dir, config); !r) {
      return fail(r.error().context("user \"" + *userName + "\""));
    }
  }
  return config;
}

std::string oneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  return text;
}

}  // namespace

Result<KubeConfig> loadKubeconfigFile(const std::string& path, const std::string& context) {
  auto text = readFile(path);
  if (!text) {
    return fail("kubeconfig " + text.error().message);
  }
  auto config = parseKubeconfigText(*text, fs::path(path).parent_path().string(), context);
  if (!config) {
    return fail(config.error().context("kubeconfig " + path));
  }
  return config;
}

Result<KubeConfig> parseKubeconfigText(std::string_view text, const std::string& dir,
                                       const std::string& context) {
  try {
    YAML::Node root = YAML::Load(std::string(text));
    auto config = parseKubeconfig(root, fs::path(dir), context);
    if (!config) {
      return fail(oneLine(config.error().message));
    }
    return config;
  } catch (const YAML::Exception& e) {
    return fail("invalid YAML: " + oneLine(e.what()));
  }
}

Result<KubeConfig> loadInClusterConfig(const std::string& accountDir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0') {
    return fail(
        "not running in a Kubernetes pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
        "are not set (use --kubeconfig)");
  }
  std::string portText = port;
  if (portText.find_first_not_of("0123456789") != std::string::npos || portText.size() > 5) {
    return fail("KUBERNETES_SERVICE_PORT \"" + portText + "\" is not a port number");
  }
  std::string hostText = host;
  if (hostText.find(':') != std::string::npos && !hostText.starts_with("[")) {
    hostText = "[" + hostText + "]";  // an IPv6 address
  }
  KubeConfig config;
  config.server = "https://" + hostText + ":" + portText;

  const std::string tokenPath = (fs::path(accountDir) / "token").string();
  auto token = readFile(tokenPath);
  if (!token) {
    return fail(token.error().context("service account token"));
  }
  config.token = std::string(trim(*token));
  if (config.token.empty()) {
    return fail("service account token " + tokenPath + ": empty");
  }
  config.tokenFile = tokenPath;

  const std::string caPath = (fs::path(accountDir) / "ca.crt").string();
  auto ca = readFile(caPath);
  if (!ca) {
    return fail(ca.error().context("service account CA"));
  }
  if (auto valid = validateCertificatePem(*ca); !valid) {
    return fail(valid.error().context("service account CA " + caPath));
  }
  config.caPem = std::move(*ca);
  return config;
}

Result<KubeConfig> loadKubeConfig(const std::string& kubeconfigPath) {
  if (!kubeconfigPath.empty()) {
    return loadKubeconfigFile(kubeconfigPath);
  }
  return loadInClusterConfig();
}

}  // namespace gvirtus
