#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base/error.h"
#include "common/http/message.h"
#include "common/http/server_options.h"
#include "common/net/sockets.h"  // parseListenAddress, for the options of our servers
#include "common/time/duration.h"
#include "common/tls/certificates.h"

// An HTTP/1.1 server, plain or TLS, for the webhook and the health endpoints. The HTTP
// library stays behind this header: handlers see plain structs.
namespace gvirtus {

class HttpServer {
 public:
  // Validates the options and loads the TLS material; binds nothing yet.
  static Result<std::unique_ptr<HttpServer>> create(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Routes `method` (GET, POST, ...) on the exact `path`. GET handlers also answer HEAD.
  // A known path with another method gets 405, an unknown path 404.
  void handle(std::string method, std::string path, HttpHandler handler);

  // Binds the address (an address in use is an error) and serves on a thread of its own.
  Result<void> start();
  // The bound port (useful with port 0); 0 before start().
  int port() const;
  // Stops accepting, closes open connections and joins every thread. Idempotent; the
  // destructor calls it.
  void stop();

  bool tls() const;
  // Replaces the serving certificate for new handshakes (TLS servers only). An invalid
  // pair is an error and the previous one keeps serving. With certificate files, the next
  // change of the files replaces it again.
  Result<void> setCertificate(const PemKeyPair& pair);
  // The notAfter of the serving certificate in use (nullopt: not TLS, or none loaded).
  std::optional<std::chrono::system_clock::time_point> certificateNotAfter() const;

  // Connections closed at once, and requests answered 503, because every worker was busy
  // and the queue full, or maxConnections were open.
  std::size_t rejectedConnections() const;
  // Connections closed at once because their peer had maxConnectionsPerPeer open.
  std::size_t peerRejectedConnections() const;
  // Connections closed because a request or a TLS handshake missed its deadline.
  std::size_t timedOutConnections() const;
  // Connections open now: handshaking, idle between requests, on their way in or served.
  std::size_t openConnections() const;

  struct Impl;
  // Only create() can name the key.
  class PassKey {
    friend class HttpServer;
    explicit PassKey() = default;
  };
  HttpServer(PassKey, std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gvirtus
