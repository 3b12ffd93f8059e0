#include "common/http_connection.h"

#include <sys/socket.h>

#include <algorithm>

#include "common/http_exchange.h"
#include "common/http_server.h"

namespace gvirtus {

HttpConnection::HttpConnection(HttpConnectionRegistry& reg, UniqueFd socket,
                               std::pair<std::string, int> peer,
                               std::unique_ptr<TlsSession> session,
                               const HttpServerOptions& options)
    : registry(reg),
      fd(std::move(socket)),
      addr(std::move(peer.first)),
      port(peer.second),
      tls(std::move(session)),
      stream(fd.get(), tls.get(), options.readTimeout, options.writeTimeout),
      scanner(requestLimits(options.maxBodyBytes)),
      remaining(std::max<size_t>(options.keepAliveMaxRequests, 1)) {}

HttpConnection::~HttpConnection() {
  if (admitted) {
    registry.release(fd.get(), addr);
  }
}

void HttpConnection::awaitNextRequest(Duration keepAliveTimeout) {
  --remaining;
  scanner.reset();
  continueSent = false;
  phase = Phase::Idle;
  deadline = std::chrono::steady_clock::now() + keepAliveTimeout;
}

void HttpConnection::beginDrain() {
  ::shutdown(fd.get(), SHUT_WR);
  phase = Phase::Draining;
  deadline = std::chrono::steady_clock::now() + kLingerTime;
  drained = 0;
}

void HttpConnection::answerAndDrain(int status, std::string_view body) {
  std::string out;
  appendResponseHead(out, {.status = status,
                           .contentType = "text/plain; charset=utf-8",
                           .contentLength = body.size(),
                           .close = true});
  out += body;
  stream.writeNow(out);  // best effort: the connection closes either way
  if (tls) {
    tls->shutdown();
  }
  beginDrain();
}

}  // namespace gvirtus
