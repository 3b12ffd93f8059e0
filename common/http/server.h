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
#include "common/net/sockets.h"  // parseListenAddress, for the options of our servers
#include "common/time/duration.h"
#include "common/tls/certificates.h"

// An HTTP/1.1 server, plain or TLS, for the webhook and the health endpoints. The HTTP
// library stays behind this header: handlers see plain structs.
namespace gvirtus {

struct HttpRequest {
  std::string method;
  // The path without the query string.
  std::string path;
  std::string body;
  // As received (names keep their spelling; several may share a name).
  std::vector<std::pair<std::string, std::string>> headers;
  // Decoded query parameters, sorted by name.
  std::vector<std::pair<std::string, std::string>> query;
  std::string remoteAddr;
  int remotePort = 0;

  // The first header with this name, compared case-insensitively; empty when absent.
  std::string header(std::string_view name) const;
  bool hasHeader(std::string_view name) const;
  // The first query parameter with this name; empty when absent.
  std::string queryParam(std::string_view name) const;
  bool hasQueryParam(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string contentType = "text/plain; charset=utf-8";
  // Extra headers. Content-Length is computed; a Content-Type here overrides contentType.
  std::vector<std::pair<std::string, std::string>> headers;
};

// A handler that throws is answered with 500 (and the exception is logged); it never
// reaches the server's threads.
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  // "HOST:PORT", ":PORT" (every interface, IPv6 and IPv4 when the host has IPv6),
  // "[::1]:PORT"; port 0 picks a free port (see HttpServer::port()).
  std::string address = ":8080";

  // TLS is on when a certificate comes from files or from memory (or `tls` is set, for a
  // server whose certificate arrives later through setCertificate: until then every
  // handshake fails). Files are PEM (certificate chain, leaf first; private key) and are
  // re-read when they change, checked by new handshakes at most once per
  // certificateCheckInterval; a pair that does not load keeps the previous one serving and
  // is logged.
  bool tls = false;
  std::string certFile;
  std::string keyFile;
  std::optional<PemKeyPair> certificate;
  // How often a handshake may look at the certificate files (tests: zero, every one).
  Duration certificateCheckInterval = std::chrono::seconds(1);

  // Larger request bodies are answered 413 without being read.
  std::size_t maxBodyBytes = 1024 * 1024;

  // One thread reads every connection (TLS handshakes, idle keep-alive waits, requests on
  // their way in) without waiting on any; a request goes to one of `workers` threads only
  // once its head and body are all there, so a client that trickles its bytes holds no
  // worker. Up to `maxQueued` whole requests wait for a worker; beyond that a new connection
  // is closed at once, and a request that arrives is answered 503.
  std::size_t workers = 16;
  std::size_t maxQueued = 64;
  // After answering on a kept-alive connection, a worker waits this long for the next
  // request there, while nothing waits for a worker and another is idle: a busy client's
  // requests then skip the round trip through the reader thread (two wake-ups and two
  // epoll changes each). A quiet or trickling client goes back to the reader after it, so
  // it never holds a worker longer. Zero: always back to the reader at once.
  Duration stayForNextRequest = std::chrono::milliseconds(2);
  // Connections open at once, in all and from one peer (source address); a new connection
  // beyond either is closed at once. The per-peer default leaves an API server room for its
  // pool of kept-alive connections.
  std::size_t maxConnections = 1024;
  std::size_t maxConnectionsPerPeer = 64;

  // A request's head and body must arrive within requestTimeout of its first byte, and a
  // TLS handshake within handshakeTimeout of the connection, however steadily the bytes
  // trickle in; past it the connection is closed, after a 408 for a request.
  Duration requestTimeout = std::chrono::seconds(10);
  Duration handshakeTimeout = std::chrono::seconds(5);
  // How long a new connection may stay silent before its first request (after the
  // handshake); also the most one read may wait, within the request's deadline.
  Duration readTimeout = std::chrono::seconds(10);
  // Per write of a response.
  Duration writeTimeout = std::chrono::seconds(10);
  // How long an idle connection is kept between requests, and for how many requests.
  Duration keepAliveTimeout = std::chrono::seconds(30);
  std::size_t keepAliveMaxRequests = 1000;
  // Names the server in log lines ("webhook", "health").
  std::string name = "http";
};

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
