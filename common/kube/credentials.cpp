#include "common/kube/client_impl.h"

#include <openssl/err.h>
#include <openssl/x509.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "common/tls/openssl_util.h"

// The client certificate, key and certificate authority a KubeClient takes from its kubeconfig.
namespace gvirtus {
namespace {

Result<std::vector<X509Ptr>> readCertificates(const std::string& pem, const std::string& what) {
  std::vector<X509Ptr> certs;
  if (auto bio = memoryBio(pem)) {
    certs = readPemCertificates(bio->get());
  }
  ERR_clear_error();
  if (certs.empty()) {
    return fail(what + ": no PEM certificate found");
  }
  return certs;
}

Result<PkeyPtr> readKey(const std::string& pem) {
  auto bio = memoryBio(pem);
  if (!bio) {
    return fail(bio.error().context("client key"));
  }
  PkeyPtr key = readPemPrivateKey(bio->get());
  if (!key) {
    return fail("client key: " + opensslReason());
  }
  return key;
}

}  // namespace

Result<void> KubeClient::Impl::loadCredentials() {
  if (!url_.tls) {
    return {};
  }
  if (!config_.clientCertPem.empty() || !config_.clientKeyPem.empty()) {
    if (config_.clientCertPem.empty() || config_.clientKeyPem.empty()) {
      return fail("a client certificate needs both certificate and key");
    }
    auto certs = readCertificates(config_.clientCertPem, "client certificate");
    if (!certs) {
      return fail(certs.error());
    }
    auto key = readKey(config_.clientKeyPem);
    if (!key) {
      return fail(key.error());
    }
    if (X509_check_private_key(certs->front().get(), key->get()) != 1) {
      ERR_clear_error();
      return fail("client certificate and client key do not match");
    }
    clientCert_ = std::move(certs->front());
    for (size_t i = 1; i < certs->size(); ++i) {
      clientChain_.push_back(std::move((*certs)[i]));
    }
    clientKey_ = std::move(*key);
  }
  if (!config_.caPem.empty() && !config_.insecureSkipTlsVerify) {
    auto cas = readCertificates(config_.caPem, "certificate authority");
    if (!cas) {
      return fail(cas.error());
    }
    caCerts_ = std::move(*cas);
  }
  return {};
}

}  // namespace gvirtus
