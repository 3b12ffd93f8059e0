#include "common/http/server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

#include "common/base/unique_fd.h"
#include "common/http/connection.h"
#include "common/http/connection_registry.h"
#include "common/http/exchange.h"
#include "common/http/listener.h"
#include "common/http/reader.h"
#include "common/http/router.h"
#include "common/http/workers.h"
#include "common/net/sockets.h"
#include "common/telemetry/log.h"
#include "common/tls/server_context.h"

// The server's parts, in the order a request meets them: the listener accepts a
// connection and admits it (here) to the reader, which holds it until a whole request has
// arrived; a worker serves it (here) through an HttpExchange and hands the connection back
// to the reader to wait for the next one.
namespace gvirtus {

namespace {

using Clock = std::chrono::steady_clock;
using Phase = HttpConnection::Phase;

// Warnings about refused connections: at most one per kind in this time.
constexpr int64_t kRefusalLogMillis = 10000;

// At most one warning per kRefusalLogMillis through `last` (a steady-clock millisecond).
bool logDue(std::atomic<int64_t>& last) {
  int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
          .count();
  int64_t seen = last.load();
  return now - seen >= kRefusalLogMillis && last.compare_exchange_strong(seen, now);
}

}  // namespace

struct HttpServer::Impl {
  Impl(HttpServerOptions o, std::string host, int port);

  HttpServerOptions options;
  HttpRouter router;
  std::unique_ptr<TlsServerContext> tls;  // null: plain HTTP

  // Lifecycle, guarded by stateMutex.
  std::mutex stateMutex;
  bool started = false;
  std::atomic<bool> stopping{false};
  HttpListener listener;
  HttpExchange exchange;
  HttpConnectionRegistry registry;
  std::unique_ptr<HttpWorkers> workers;
  std::unique_ptr<HttpReader> reader;
  std::jthread thread;

  std::atomic<size_t> rejected{0};
  std::atomic<size_t> peerRejected{0};
  std::atomic<size_t> timedOut{0};
  std::atomic<int64_t> lastRejectLog{0};
  std::atomic<int64_t> lastPeerRejectLog{0};

  void serveLoop();
  void admit(UniqueFd fd);
  void serve(std::unique_ptr<HttpConnection> connection);
  // One request off `c`, answered; a handler's exception closes the connection.
  HttpExchange::After answer(HttpConnection& c);
  void noteRejected();
  void notePeerRejected(const std::string& peer);
};

HttpServer::Impl::Impl(HttpServerOptions o, std::string host, int port)
    : options(std::move(o)),
      listener(std::move(host), port, options.name),
      exchange(options, router, stopping) {}

void HttpServer::Impl::serveLoop() {
  listener.run([this](UniqueFd fd) { admit(std::move(fd)); });
  // The reader first: what a worker hands back afterwards is closed.
  reader->stop();
  workers->shutdown();
}

// A new connection goes to the reader, or is closed at once: the server is stopping or
// full, or its peer has maxConnectionsPerPeer open.
void HttpServer::Impl::admit(UniqueFd fd) {
  if (stopping) {
    return;
  }
  if (workers->full()) {
    noteRejected();
    return;
  }
  int socket = fd.get();
  int one = 1;
  ::setsockopt(socket, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::unique_ptr<TlsSession> session;
  if (tls) {
    session = tls->newSession(socket);
    if (!session) {
      return;
    }
  }
  auto connection = std::make_unique<HttpConnection>(registry, std::move(fd), peerAddress(socket),
                                                     std::move(session), options);
  switch (registry.admit(socket, connection->addr, options.maxConnectionsPerPeer,
                         options.maxConnections)) {
    case HttpConnectionRegistry::Admit::Ok:
      connection->admitted = true;
      break;
    case HttpConnectionRegistry::Admit::PeerFull:
      notePeerRejected(connection->addr);
      return;
    case HttpConnectionRegistry::Admit::ServerFull:
      noteRejected();
      return;
    case HttpConnectionRegistry::Admit::Stopping:
      return;
  }
  auto now = Clock::now();
  if (tls) {
    connection->phase = Phase::Handshake;
    connection->deadline = now + options.handshakeTimeout;
  } else {
    connection->phase = Phase::Idle;
    connection->deadline = now + options.readTimeout;
  }
  reader->add(std::move(connection));
}

// Serves the request the reader found whole, and the next ones that arrive at once on the
// same connection while another worker is free; then hands the connection back to the
// reader to wait for the next one (or to drain it), or closes it.
void HttpServer::Impl::serve(std::unique_ptr<HttpConnection> connection) {
  HttpConnection& c = *connection;
  for (;;) {
    HttpExchange::After after = answer(c);
    if (after == HttpExchange::After::KeepAlive && !stopping) {
      c.awaitNextRequest(options.keepAliveTimeout);
      if (options.stayForNextRequest > Duration::zero() && workers->spare() &&
          c.readRequestWithin(options.requestTimeout, options.stayForNextRequest) ==
              HttpConnection::Progress::Whole) {
        c.stream.setReadDeadline(c.deadline);
        continue;
      }
      reader->add(std::move(connection));
      return;
    }
    if (c.tls) {
      c.tls->shutdown();
    }
    if (after == HttpExchange::After::DrainAndClose) {
      c.beginDrain();
      reader->add(std::move(connection));
    }
    return;
  }
}

HttpExchange::After HttpServer::Impl::answer(HttpConnection& c) {
  try {
    return exchange.serve(c.stream, c.addr, c.port, c.remaining);
  } catch (const std::exception& e) {
    log::error("HTTP connection failed", {{"server", options.name}, {"error", e.what()}});
  } catch (...) {
    log::error("HTTP connection failed", {{"server", options.name}});
  }
  return HttpExchange::After::Close;
}

void HttpServer::Impl::noteRejected() {
  size_t total = ++rejected;
  if (!stopping && logDue(lastRejectLog)) {
    log::warn("HTTP server busy: closing new connections", {{"server", options.name},
                                                            {"workers", options.workers},
                                                            {"maxQueued", options.maxQueued},
                                                            {"rejectedTotal", total}});
  }
}

void HttpServer::Impl::notePeerRejected(const std::string& peer) {
  size_t total = ++peerRejected;
  if (!stopping && logDue(lastPeerRejectLog)) {
    log::warn("HTTP peer at its connection limit: closing its new connections",
              {{"server", options.name},
               {"peer", peer},
               {"maxConnectionsPerPeer", options.maxConnectionsPerPeer},
               {"rejectedTotal", total}});
  }
}

// ---- HttpServer ----------------------------------------------------------------------------

HttpServer::HttpServer(PassKey, std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  stop();
}

Result<std::unique_ptr<HttpServer>> HttpServer::create(HttpServerOptions options) {
  auto address = parseListenAddress(options.address);
  if (!address) {
    return fail(address.error());
  }
  if (options.maxBodyBytes == 0) {
    return fail("maxBodyBytes must be positive");
  }
  if (options.readTimeout <= Duration::zero() || options.writeTimeout <= Duration::zero() ||
      options.keepAliveTimeout <= Duration::zero() || options.requestTimeout <= Duration::zero() ||
      options.handshakeTimeout <= Duration::zero() ||
      options.stayForNextRequest < Duration::zero()) {
    return fail("HTTP timeouts must be positive");
  }
  if (options.maxConnections == 0 || options.maxConnectionsPerPeer == 0) {
    return fail("HTTP connection limits must be positive");
  }
  auto impl = std::make_unique<Impl>(std::move(options), address->first, address->second);
  const auto& o = impl->options;
  if (o.tls || o.certificate || !o.certFile.empty() || !o.keyFile.empty()) {
    auto tls = TlsServerContext::create({.certFile = o.certFile,
                                         .keyFile = o.keyFile,
                                         .certificate = o.certificate,
                                         .checkInterval = o.certificateCheckInterval,
                                         .name = o.name});
    if (!tls) {
      return fail(tls.error());
    }
    impl->tls = std::move(*tls);
  }
  return std::make_unique<HttpServer>(PassKey{}, std::move(impl));
}

void HttpServer::handle(std::string method, std::string path, HttpHandler handler) {
  impl_->router.add(std::move(method), std::move(path), std::move(handler));
}

Result<void> HttpServer::start() {
  std::lock_guard lock(impl_->stateMutex);
  if (impl_->stopping) {
    return fail("HTTP server " + impl_->options.name + " was stopped");
  }
  if (impl_->started) {
    return fail("HTTP server " + impl_->options.name + " already started");
  }
  Impl* self = impl_.get();
  auto reader =
      HttpReader::create({.readTimeout = self->options.readTimeout,
                          .requestTimeout = self->options.requestTimeout,
                          .name = self->options.name},
                         {.dispatch =
                              [self](std::unique_ptr<HttpConnection>& connection) {
                                return self->workers->submit(connection);
                              },
                          .overloaded = [self] { self->noteRejected(); },
                          .timedOut =
                              [self](const HttpConnection& connection, std::string_view what) {
                                ++self->timedOut;
                                log::debug("HTTP connection closed: missed its deadline",
                                           {{"server", self->options.name},
                                            {"what", std::string(what)},
                                            {"peer", connection.addr}});
                              }});
  if (!reader) {
    return fail(reader.error().context("HTTP server " + impl_->options.name));
  }
  if (auto r = impl_->listener.bind(); !r) {
    return r;
  }
  impl_->started = true;
  impl_->workers = std::make_unique<HttpWorkers>(
      self->options.workers, self->options.maxQueued,
      [self](std::unique_ptr<HttpConnection> connection) { self->serve(std::move(connection)); });
  impl_->reader = std::move(*reader);
  impl_->thread = std::jthread([self] { self->serveLoop(); });
  log::info("HTTP server listening", {{"server", impl_->options.name},
                                      {"address", impl_->options.address},
                                      {"port", impl_->listener.port()},
                                      {"tls", impl_->tls != nullptr}});
  return {};
}

int HttpServer::port() const {
  return impl_->listener.port();
}

void HttpServer::stop() {
  {
    std::lock_guard lock(impl_->stateMutex);
    impl_->stopping = true;
    // Wakes the accept loop: accept fails, the loop ends and the workers are joined.
    impl_->listener.stop();
  }
  // Wakes workers blocked on slow connections.
  impl_->registry.shutdownAll();
  if (impl_->thread.joinable()) {
    impl_->thread.join();
  }
}

bool HttpServer::tls() const {
  return impl_->tls != nullptr;
}

Result<void> HttpServer::setCertificate(const PemKeyPair& pair) {
  if (!impl_->tls) {
    return fail("HTTP server " + impl_->options.name + " does not serve TLS");
  }
  return impl_->tls->setCertificate(pair);
}

std::optional<std::chrono::system_clock::time_point> HttpServer::certificateNotAfter() const {
  return impl_->tls ? impl_->tls->certificateNotAfter() : std::nullopt;
}

size_t HttpServer::rejectedConnections() const {
  return impl_->rejected;
}

size_t HttpServer::peerRejectedConnections() const {
  return impl_->peerRejected;
}

size_t HttpServer::timedOutConnections() const {
  return impl_->timedOut;
}

size_t HttpServer::openConnections() const {
  return impl_->registry.size();
}

}  // namespace gvirtus
