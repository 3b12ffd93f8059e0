#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "common/base/unique_fd.h"
#include "common/http/codec.h"
#include "common/http/connection_registry.h"
#include "common/http/stream.h"
#include "common/time/duration.h"
#include "common/tls/server_context.h"

// One client connection of an HttpServer, between the reader thread and the workers: its
// socket, TLS session, buffered stream, the scan of the request on its way in, and where
// it stands. Internal to HttpServer.
namespace gvirtus {

struct HttpServerOptions;

// After answering a request whose body was left unread, the rest of the body is read and
// dropped for at most this long / this much, so the client sees the answer instead of a
// reset (a "lingering close").
inline constexpr auto kLingerTime = std::chrono::seconds(2);
inline constexpr std::size_t kLingerBytes = 16 * 1024 * 1024;

// Owned by one thread at a time: the reader while it waits for bytes, a worker while it
// serves a request.
struct HttpConnection {
  // Where a connection is while the reader holds it.
  enum class Phase {
    Handshake,  // TLS, until handshakeTimeout
    Idle,       // before a request's first byte: readTimeout, or keepAliveTimeout between two
    Reading,    // a request has begun: its head and body until requestTimeout
    Draining,   // answered and closing: what it still sends is dropped, for kLingerTime
  };

  // Not yet admitted: the caller counts it in `registry` and sets `admitted`.
  HttpConnection(HttpConnectionRegistry& registry, UniqueFd socket,
                 std::pair<std::string, int> peer, std::unique_ptr<TlsSession> session,
                 const HttpServerOptions& options);
  // Leaves the registry before the socket closes, so that stop() never shuts down a
  // descriptor number that was reused.
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // After a request answered on a kept-alive connection: idle until the next one, for at
  // most `keepAliveTimeout`.
  void awaitNextRequest(Duration keepAliveTimeout);

  // Where a request on its way in stands.
  enum class Progress { Whole, WantRead, WantWrite, Closed };
  // Reads what the socket has now, without waiting, until the request is whole or the
  // socket has no more; its first byte starts its `requestTimeout`. Answers 100-continue.
  Progress readRequest(Duration requestTimeout);
  // As readRequest, waiting up to `window` for bytes: a worker that has just answered
  // stays for the next request of a busy client instead of handing it to the reader.
  Progress readRequestWithin(Duration requestTimeout, Duration window);
  // Closes the sending side and drops what the client still sends, for kLingerTime.
  void beginDrain();
  // Answers with `status`, closes the sending side and drops what the client still sends.
  void answerAndDrain(int status, std::string_view body);

  HttpConnectionRegistry& registry;
  UniqueFd fd;
  std::string addr;
  int port;
  std::unique_ptr<TlsSession> tls;
  HttpStream stream;
  RequestScanner scanner;
  // Requests it may still serve.
  size_t remaining;
  bool admitted = false;
  Phase phase = Phase::Idle;
  std::chrono::steady_clock::time_point deadline;
  bool continueSent = false;
  size_t drained = 0;
  uint32_t watched = 0;  // the epoll events it is registered for; 0: none
};

}  // namespace gvirtus
