#include "common/http/connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>

#include "common/http/exchange.h"
#include "common/http/server_options.h"

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

HttpConnection::Progress HttpConnection::readRequest(Duration requestTimeout) {
  for (;;) {
    if (phase == Phase::Idle && !stream.buffered().empty()) {
      // The request's first byte: from now on its head and body have requestTimeout.
      phase = Phase::Reading;
      deadline = std::chrono::steady_clock::now() + requestTimeout;
    }
    if (phase == Phase::Reading) {
      stream.skipEmptyLines();
      if (scanner.scan(stream.buffered()) != RequestScanner::State::NeedMore) {
        return Progress::Whole;
      }
      if (scanner.wantsContinue() && !continueSent) {
        continueSent = true;
        if (!stream.writeNow("HTTP/1.1 100 Continue\r\n\r\n")) {
          return Progress::Closed;
        }
      }
    }
    switch (stream.fillNow()) {
      case HttpStream::Fill::Got:
        continue;
      case HttpStream::Fill::WantRead:
        return Progress::WantRead;
      case HttpStream::Fill::WantWrite:
        return Progress::WantWrite;
      case HttpStream::Fill::Closed:
        return Progress::Closed;
    }
  }
}

HttpConnection::Progress HttpConnection::readRequestWithin(Duration requestTimeout,
                                                           Duration window) {
  auto until = std::chrono::steady_clock::now() + window;
  for (;;) {
    Progress progress = readRequest(requestTimeout);
    if (progress != Progress::WantRead) {
      return progress;
    }
    auto left = std::chrono::ceil<std::chrono::milliseconds>(std::min(until, deadline) -
                                                             std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return progress;
    }
    pollfd ready{.fd = fd.get(), .events = POLLIN, .revents = 0};
    if (::poll(&ready, 1, static_cast<int>(left.count())) <= 0) {
      return progress;
    }
  }
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
