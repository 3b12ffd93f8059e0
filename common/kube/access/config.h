#pragma once

#include <string>
#include <string_view>

#include "common/base/error.h"

namespace gvirtus {

// Where and how to reach the API server: from a kubeconfig file or from the in-cluster
// service account. PEM material is held in memory; file references are read at load.
struct KubeConfig {
  std::string server;  // "https://host:port"
  std::string caPem;   // empty: the system trust store
  bool insecureSkipTlsVerify = false;
  std::string tlsServerName;  // kubeconfig tls-server-name, for SNI and verification
  std::string clientCertPem;
  std::string clientKeyPem;
  std::string token;      // a static bearer token
  std::string tokenFile;  // re-read when it changes (projected tokens rotate)
  std::string ns;         // the context's namespace (kubeconfig only; empty when unset)
};

// Reads a kubeconfig: the current context (or `context` when not empty), its cluster
// (server, certificate-authority[-data], insecure-skip-tls-verify, tls-server-name) and
// user (client-certificate[-data], client-key[-data], token, tokenFile). Relative file
// paths are relative to the kubeconfig's folder. Errors are one line naming the problem:
// missing file, unknown context, bad base64, unreadable key.
Result<KubeConfig> loadKubeconfigFile(const std::string& path, const std::string& context = {});
// The same from the file's text; relative file references are taken from `dir`.
Result<KubeConfig> parseKubeconfigText(std::string_view text, const std::string& dir,
                                       const std::string& context = {});

// In-cluster: KUBERNETES_SERVICE_HOST/PORT and the service account files under
// `accountDir` (token, ca.crt).
Result<KubeConfig> loadInClusterConfig(
    const std::string& accountDir = "/var/run/secrets/kubernetes.io/serviceaccount");

// --kubeconfig PATH when given, else in-cluster.
Result<KubeConfig> loadKubeConfig(const std::string& kubeconfigPath);

}  // namespace gvirtus
