#include "common/http/exchange.h"

#include <chrono>
#include <exception>
#include <optional>
#include <string_view>
#include <utility>

#include "common/base/strings.h"
#include "common/telemetry/log.h"

namespace gvirtus {

namespace {

HttpResponse plainResponse(int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

}  // namespace

RequestLimits requestLimits(std::size_t maxBodyBytes) {
  return RequestLimits{kHeaderBudget, maxBodyBytes, kChunkLineLimit};
}

HttpExchange::HttpExchange(const HttpServerOptions& options, const HttpRouter& router,
                           const std::atomic<bool>& stopping)
    : options_(options), router_(router), stopping_(stopping) {}

HttpExchange::After HttpExchange::serve(HttpStream& stream, const std::string& remoteAddr,
                                        int remotePort, size_t remaining) const {
  // Answers that end the connection: the rest of the input cannot be trusted, or a body
  // was left unread.
  auto refuse = [&](int status, std::string_view why, HttpFields headers = {}) {
    HttpResponse response = plainResponse(status, std::string(why) + "\n");
    response.headers = std::move(headers);
    respond(stream, response, false, true, 0);
    return After::DrainAndClose;
  };

  std::string_view headText;
  switch (stream.readHead(kHeaderBudget, headText)) {
    case HttpStream::Read::Ok:
      break;
    case HttpStream::Read::Closed:
      return After::Close;
    case HttpStream::Read::TooLarge:
      return refuse(431, "request header fields too large");
  }
  auto parsed = parseRequestHead(headText);
  if (!parsed) {
    return refuse(parsed.error().status, parsed.error().reason);
  }
  RequestHead& head = *parsed;
  const bool hasBody = head.framing != BodyFraming::None;

  HttpRouter::Route route = router_.find(head.method, head.path);
  if (!route.handler) {
    if (route.allowed.empty()) {
      return hasBody ? refuse(404, "not found")
                     : answer(stream, head, remaining, plainResponse(404, "not found\n"));
    }
    if (hasBody) {
      return refuse(405, "method not allowed", {{"Allow", route.allowed}});
    }
    HttpResponse response = head.method == "OPTIONS" ? plainResponse(204, "")
                                                     : plainResponse(405, "method not allowed\n");
    response.headers.emplace_back("Allow", std::move(route.allowed));
    return answer(stream, head, remaining, response);
  }

  HttpRequest request;
  if (hasBody) {
    if (head.framing == BodyFraming::ContentLength && head.contentLength > options_.maxBodyBytes) {
      return refuse(413, "request body too large");
    }
    switch (readBody(stream, head, request.body)) {
      case BodyRead::Ok:
        break;
      case BodyRead::Closed:
        return After::Close;
      case BodyRead::TooLarge:
        return refuse(413, "request body too large");
      case BodyRead::Malformed:
        return refuse(400, "malformed chunked body");
    }
  }
  request.method = head.method;  // answer() reads it (HEAD)
  request.path = std::move(head.path);
  request.headers = std::move(head.headers);
  request.query = std::move(head.query);
  request.remoteAddr = remoteAddr;
  request.remotePort = remotePort;

  return answer(stream, head, remaining, callHandler(route, request));
}

HttpResponse HttpExchange::callHandler(const HttpRouter::Route& route,
                                       const HttpRequest& request) const {
  HttpResponse response;
  try {
    response = route.handler(request);
  } catch (const std::exception& e) {
    log::error("HTTP handler failed", {{"server", options_.name},
                                       {"method", request.method},
                                       {"path", request.path},
                                       {"error", e.what()}});
    response = plainResponse(500, "internal server error\n");
  } catch (...) {
    log::error("HTTP handler failed",
               {{"server", options_.name}, {"method", request.method}, {"path", request.path}});
    response = plainResponse(500, "internal server error\n");
  }
  return response;
}

HttpExchange::After HttpExchange::answer(HttpStream& stream, const RequestHead& head,
                                         size_t remaining, const HttpResponse& response) const {
  bool close = !head.keepAlive || remaining <= 1 || stopping_;
  for (const auto& [name, value] : response.headers) {
    if (equalsIgnoreCase(name, "Connection") && equalsIgnoreCase(trim(value), "close")) {
      close = true;
    }
  }
  if (!respond(stream, response, head.method == "HEAD", close, remaining - 1)) {
    return After::Close;
  }
  return close ? After::Close : After::KeepAlive;
}

HttpExchange::BodyRead HttpExchange::readBody(HttpStream& stream, const RequestHead& head,
                                              std::string& body) const {
  if (head.framing == BodyFraming::ContentLength) {
    body.reserve(head.contentLength);
    return stream.readExact(head.contentLength, body) ? BodyRead::Ok : BodyRead::Closed;
  }
  std::string line;
  auto next = [&](size_t limit) -> std::optional<BodyRead> {
    switch (stream.readLine(limit, line)) {
      case HttpStream::Read::Ok:
        return std::nullopt;
      case HttpStream::Read::Closed:
        return BodyRead::Closed;
      case HttpStream::Read::TooLarge:
        return BodyRead::Malformed;
    }
    return BodyRead::Malformed;
  };
  // Framing may add to the body's size, within a bound: many tiny chunks with long
  // extensions must not keep a worker reading without end.
  size_t framing = 0;
  const size_t maxFraming = requestLimits(options_.maxBodyBytes).maxChunkFraming();
  for (;;) {
    if (auto failed = next(kChunkLineLimit)) {
      return *failed;
    }
    framing += line.size() + 4;
    if (framing > maxFraming) {
      return BodyRead::Malformed;
    }
    auto size = parseChunkSize(line);
    if (!size) {
      return BodyRead::Malformed;
    }
    if (*size == 0) {
      break;
    }
    if (*size > options_.maxBodyBytes - body.size()) {
      return BodyRead::TooLarge;
    }
    if (!stream.readExact(*size, body)) {
      return BodyRead::Closed;
    }
    if (auto failed = next(0)) {  // the CRLF after the chunk's data
      return *failed;
    }
  }
  // Trailer fields are read and dropped, within the head's budget.
  size_t trailers = 0;
  for (;;) {
    if (auto failed = next(kChunkLineLimit)) {
      return *failed;
    }
    if (line.empty()) {
      return BodyRead::Ok;
    }
    trailers += line.size() + 2;
    if (trailers > kHeaderBudget) {
      return BodyRead::Malformed;
    }
  }
}

bool HttpExchange::respond(HttpStream& stream, const HttpResponse& response, bool headOnly,
                           bool close, size_t keepAliveMax) const {
  std::string_view contentType = response.contentType;
  for (const auto& [name, value] : response.headers) {
    if (equalsIgnoreCase(name, "Content-Type")) {
      contentType = value;
    }
  }
  std::string out;
  out.reserve(192 + response.body.size());
  appendResponseHead(
      out, {.status = response.status,
            .contentType = contentType,
            .contentLength = response.body.size(),
            .extra = &response.headers,
            .close = close,
            .keepAliveSeconds =
                std::chrono::ceil<std::chrono::seconds>(options_.keepAliveTimeout).count(),
            .keepAliveMax = keepAliveMax});
  if (!headOnly && !statusHasNoBody(response.status)) {
    out += response.body;
  }
  return stream.writeAll(out);
}

}  // namespace gvirtus
