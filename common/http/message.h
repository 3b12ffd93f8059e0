#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// The HTTP messages our server hands its handlers and takes back from them: plain structs,
// no HTTP library behind them. What a handler includes, and the parts of the server below
// its façade (common/http/server.h).
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

}  // namespace gvirtus
