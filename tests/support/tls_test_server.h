#pragma once

// A loopback TLS server for unit tests: an httplib::SSLServer on 127.0.0.1, port 0, with
// a CA, serving and client certificates made by common/tls/certificates.h. Unit tests use it as
// a stand-in API server to check what the client sends and how it reads answers; the real
// API server is used by the integration tests (tests/integration/).
//
// Header-only on purpose: tests/common/CMakeLists.txt builds every *_test.cpp, nothing else.

#include <httplib.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/kube/access/config.h"
#include "common/tls/certificates.h"
#include "support/eventually.h"

namespace gvirtus::testing {

// The certificates of one test: a CA, a serving certificate for localhost/127.0.0.1/::1 and
// a client certificate (CN test-user, O system:masters), all signed by the CA.
struct TestPki {
  PemKeyPair ca;
  PemKeyPair server;
  PemKeyPair client;
};

inline TestPki makeTestPki(const std::string& caName = "test-ca") {
  const std::chrono::hours day(24);
  auto ca = generateCa(caName, day);
  if (!ca) {
    throw std::runtime_error(ca.error().message);
  }
  auto server = generateServingCert(*ca, "localhost", {"localhost"}, {"127.0.0.1", "::1"}, day);
  if (!server) {
    throw std::runtime_error(server.error().message);
  }
  auto client = generateClientCert(*ca, "test-user", {"system:masters"}, day);
  if (!client) {
    throw std::runtime_error(client.error().message);
  }
  return TestPki{*ca, *server, *client};
}

namespace tls_detail {

struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct StoreFree {
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
};

inline std::unique_ptr<BIO, BioFree> bio(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

inline std::unique_ptr<X509, X509Free> certificate(const std::string& pem) {
  auto b = bio(pem);
  std::unique_ptr<X509, X509Free> cert(PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    throw std::runtime_error("test server: bad certificate");
  }
  return cert;
}

inline std::unique_ptr<EVP_PKEY, PkeyFree> privateKey(const std::string& pem) {
  auto b = bio(pem);
  std::unique_ptr<EVP_PKEY, PkeyFree> key(
      PEM_read_bio_PrivateKey(b.get(), nullptr, nullptr, nullptr));
  if (!key) {
    throw std::runtime_error("test server: bad key");
  }
  return key;
}

}  // namespace tls_detail

// The CN of the client certificate of a request, empty when none was presented.
inline std::string peerCommonName(const httplib::Request& request) {
  if (request.ssl == nullptr) {
    return {};
  }
  X509* peer = SSL_get0_peer_certificate(request.ssl);
  if (peer == nullptr) {
    return {};
  }
  char buffer[256] = {};
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, buffer,
                                sizeof buffer) < 0) {
    return {};
  }
  return buffer;
}

class TlsTestServer {
 public:
  // With `requireClientCert`, the handshake fails for clients without a certificate signed
  // by the test CA.
  explicit TlsTestServer(const TestPki& pki, bool requireClientCert = false)
      : pki_(pki), server_([&] {
          auto cert = tls_detail::certificate(pki.server.certPem);
          auto key = tls_detail::privateKey(pki.server.keyPem);
          X509_STORE* clientCas = nullptr;
          if (requireClientCert) {
            clientCas = X509_STORE_new();
            X509_STORE_add_cert(clientCas, tls_detail::certificate(pki.ca.certPem).get());
          }
          // SSLServer takes references to cert and key, and owns the store.
          return std::make_unique<httplib::SSLServer>(cert.get(), key.get(), clientCas);
        }()) {
    if (!server_->is_valid()) {
      throw std::runtime_error("test server: invalid TLS setup");
    }
    server_->set_keep_alive_timeout(1);
    server_->set_read_timeout(5);
  }

  ~TlsTestServer() { stop(); }
  TlsTestServer(const TlsTestServer&) = delete;
  TlsTestServer& operator=(const TlsTestServer&) = delete;

  // Register handlers here, then start().
  httplib::Server& http() { return *server_; }

  void start() {
    port_ = server_->bind_to_any_port("127.0.0.1");
    if (port_ <= 0) {
      throw std::runtime_error("test server: cannot bind 127.0.0.1");
    }
    // bind_to_any_port already listens: connections queue until the loop runs.
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    // httplib 0.11's stop() does nothing before the loop has started; wait for it, so that
    // a test that ends at once does not hang in stop().
    eventually([this] { return server_->is_running(); }, std::chrono::seconds(10),
               std::chrono::milliseconds(1));
  }

  void stop() {
    stopping_.store(true);
    if (thread_.joinable()) {
      server_->stop();
      thread_.join();
    }
  }

  // True once the server is shutting down: long-running handlers must end.
  bool stopping() const { return stopping_.load(); }
  int port() const { return port_; }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  const TestPki& pki() const { return pki_; }

  // A client configuration trusting the test CA, without credentials.
  KubeConfig kubeConfig() const {
    KubeConfig config;
    config.server = url();
    config.caPem = pki_.ca.certPem;
    return config;
  }

 private:
  TestPki pki_;
  std::unique_ptr<httplib::SSLServer> server_;
  std::atomic<bool> stopping_{false};
  int port_ = 0;
  std::thread thread_;
};

}  // namespace gvirtus::testing
