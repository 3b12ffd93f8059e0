#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "common/time/duration.h"
#include "common/tls/certificates.h"

// How one of our HTTP servers listens, frames and limits what it serves: given to
// HttpServer::create (common/http/server.h) and read by the parts beneath it.
namespace gvirtus {

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

}  // namespace gvirtus
