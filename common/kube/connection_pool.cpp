#include "common/kube/client_impl.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "common/tls/openssl_util.h"

// The connections of a KubeClient to its API server: each made for the server URL with the
// kubeconfig's TLS material, kept alive in a pool of idle ones, and what a failed one says.
namespace gvirtus {
namespace {

using kube_detail::Connection;

// Idle keep-alive connections kept for reuse (each for at most KubeClientOptions::maxIdle).
constexpr size_t kMaxIdleConnections = 8;

// OpenSSL's control macros expand to old-style casts; keep them in one place.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
long setMinTls12(SSL_CTX* ctx) {
  return SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}
long addChainCertificate(SSL_CTX* ctx, X509* cert) {
  return SSL_CTX_add1_chain_cert(ctx, cert);
}
#pragma GCC diagnostic pop

bool isIpLiteral(const std::string& host) {
  unsigned char buffer[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

// The first address of `host`, numeric, for httplib's host-to-address map.
Result<std::string> resolveFirst(const std::string& host) {
  if (isIpLiteral(host)) {
    return host;
  }
  struct addrinfo hints {};
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return fail("cannot resolve " + host + ": " + gai_strerror(rc));
  }
  std::unique_ptr<struct addrinfo, decltype(&freeaddrinfo)> guard(found, &freeaddrinfo);
  char text[NI_MAXHOST];
  if (getnameinfo(found->ai_addr, found->ai_addrlen, text, sizeof text, nullptr, 0,
                  NI_NUMERICHOST) != 0) {
    return fail("cannot resolve " + host);
  }
  return std::string(text);
}

constexpr int kConnectionExIndex = 0;  // SSL_CTX "app data"

int verifyCallback(int ok, X509_STORE_CTX* store) {
  if (ok == 1) {
    return ok;
  }
  auto* ssl =
      static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  if (ssl != nullptr) {
    auto* connection =
        static_cast<Connection*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), kConnectionExIndex));
    if (connection != nullptr && connection->verifyError.empty()) {
      connection->verifyError = X509_verify_cert_error_string(X509_STORE_CTX_get_error(store));
    }
  }
  return ok;
}

}  // namespace

namespace kube_detail {

std::string transportError(httplib::Error error, const Connection& connection,
                           const std::string& server) {
  std::string text;
  switch (error) {
    case httplib::Error::Connection:
      text = "cannot connect to " + server;
      break;
    case httplib::Error::ConnectionTimeout:
      text = "timed out connecting to " + server;
      break;
    case httplib::Error::Read:
      text = "connection lost or timed out while reading the response";
      break;
    case httplib::Error::Write:
      text = "connection lost while sending the request";
      break;
    case httplib::Error::SSLConnection:
      text = "TLS handshake with " + server + " failed";
      break;
    case httplib::Error::SSLServerVerification:
      text = "server certificate of " + server + " refused";
      break;
    default:
      text = "request failed (" + httplib::to_string(error) + ")";
      break;
  }
  if (!connection.verifyError.empty()) {
    text = "server certificate of " + server + " refused: " + connection.verifyError;
  }
  return text;
}

}  // namespace kube_detail

Result<std::unique_ptr<Connection>> KubeClient::Impl::newConnection(Duration readTimeout) {
  auto connection = std::make_unique<Connection>();
  if (!url_.tls) {
    connection->http = std::make_unique<httplib::ClientImpl>(url_.host, url_.port);
  } else {
    // With tls-server-name, that name is the one httplib sends as SNI and the one verified;
    // the connection still goes to the server URL's address.
    const std::string name = config_.tlsServerName.empty() ? url_.host : config_.tlsServerName;
    std::unique_ptr<httplib::SSLClient> client;
    if (clientKey_) {
      client = std::make_unique<httplib::SSLClient>(name, url_.port, clientCert_.get(),
                                                    clientKey_.get());
    } else {
      client = std::make_unique<httplib::SSLClient>(name, url_.port);
    }
    if (!client->is_valid()) {
      return fail("TLS client setup failed: " + opensslReason());
    }
    if (name != url_.host) {
      auto address = resolveFirst(url_.host);
      if (!address) {
        return fail(address.error());
      }
      client->set_hostname_addr_map({{name, *address}});
    }
    SSL_CTX* ctx = client->ssl_context();
    if (setMinTls12(ctx) != 1) {
      return fail("TLS 1.2 minimum: " + opensslReason());
    }
    for (const auto& cert : clientChain_) {
      if (addChainCertificate(ctx, cert.get()) != 1) {
        return fail("client certificate chain: " + opensslReason());
      }
    }
    // httplib's own verification would add the system roots to the cluster CA; verify here
    // instead, with only the kubeconfig's CA (or the system roots when it has none).
    client->enable_server_certificate_verification(false);
    if (!config_.insecureSkipTlsVerify) {
      StorePtr store(X509_STORE_new());
      if (!store) {
        return fail("X509_STORE_new: " + opensslReason());
      }
      for (const auto& ca : caCerts_) {
        if (X509_STORE_add_cert(store.get(), ca.get()) != 1) {
          return fail("certificate authority: " + opensslReason());
        }
      }
      if (caCerts_.empty() && X509_STORE_set_default_paths(store.get()) != 1) {
        return fail("system trust store: " + opensslReason());
      }
      SSL_CTX_set_cert_store(ctx, store.release());  // the context owns it now
      X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      const int set = isIpLiteral(name) ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                                        : X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
      if (set != 1) {
        return fail("server name \"" + name + "\": " + opensslReason());
      }
      SSL_CTX_set_ex_data(ctx, kConnectionExIndex, connection.get());
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, &verifyCallback);
    }
    connection->http = std::move(client);
  }
  httplib::ClientImpl& http = *connection->http;
  http.set_url_encode(false);  // paths and queries are encoded here
  http.set_keep_alive(true);
  // Requests are small writes answered at once: Nagle plus delayed ACK would add ~40 ms.
  http.set_tcp_nodelay(true);
  http.set_follow_location(false);
  http.set_connection_timeout(
      std::min<Duration>(options_.requestTimeout, std::chrono::seconds(30)));
  http.set_read_timeout(readTimeout);
  http.set_write_timeout(options_.requestTimeout);
  return connection;
}

std::unique_ptr<Connection> KubeClient::Impl::takeIdle() {
  std::lock_guard lock(idleMutex_);
  const auto now = options_.clock->now();
  while (!idle_.empty()) {
    auto connection = std::move(idle_.back());
    idle_.pop_back();
    if (now - connection->idleSince < options_.maxIdle) {
      return connection;
    }
  }
  return nullptr;
}

void KubeClient::Impl::giveBack(std::unique_ptr<Connection> connection) {
  connection->idleSince = options_.clock->now();
  std::lock_guard lock(idleMutex_);
  if (idle_.size() < kMaxIdleConnections) {
    idle_.push_back(std::move(connection));
  }
}

void KubeClient::Impl::dropIdle() {
  std::lock_guard lock(idleMutex_);
  idle_.clear();
}

}  // namespace gvirtus
