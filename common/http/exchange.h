#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "common/http/codec.h"
#include "common/http/message.h"
#include "common/http/router.h"
#include "common/http/server_options.h"
#include "common/http/stream.h"

// One request and its answer, on a worker: read off the stream once the reader has found
// it whole, routed, handled, and the response written. Internal to HttpServer.
namespace gvirtus {

// Bytes of request line and headers one request may take.
inline constexpr std::size_t kHeaderBudget = 64 * 1024;
// A chunk-size line or a trailer field.
inline constexpr std::size_t kChunkLineLimit = 4096;
// What one request may take: the reader's scan and the worker's read share them.
RequestLimits requestLimits(std::size_t maxBodyBytes);

class HttpExchange {
 public:
  // `stopping`: once set, each answer closes its connection. All three outlive it.
  HttpExchange(const HttpServerOptions& options, const HttpRouter& router,
               const std::atomic<bool>& stopping);

  // What the connection does after a request was answered.
  enum class After { KeepAlive, Close, DrainAndClose };
  // Reads, routes and answers one request; `remaining` counts it among the requests the
  // connection may still serve.
  After serve(HttpStream& stream, const std::string& remoteAddr, int remotePort,
              size_t remaining) const;

 private:
  enum class BodyRead { Ok, Closed, TooLarge, Malformed };
  BodyRead readBody(HttpStream& stream, const RequestHead& head, std::string& body) const;
  // The route's handler on the request; an exception it throws is logged and answered 500.
  HttpResponse callHandler(const HttpRouter::Route& route, const HttpRequest& request) const;
  After answer(HttpStream& stream, const RequestHead& head, size_t remaining,
               const HttpResponse& response) const;
  bool respond(HttpStream& stream, const HttpResponse& response, bool headOnly, bool close,
               size_t keepAliveMax) const;

  const HttpServerOptions& options_;
  const HttpRouter& router_;
  const std::atomic<bool>& stopping_;
};

}  // namespace gvirtus
