#include "common/http_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>

#include "common/http_codec.h"
#include "common/log.h"
#include "common/sockets.h"
#include "common/strings.h"
#include "common/tls_server_context.h"
#include "common/unique_fd.h"

namespace gvirtus {

namespace {

using Clock = std::chrono::steady_clock;

// Bytes of request line and headers one request may take.
constexpr std::size_t kHeaderBudget = 64 * 1024;
constexpr std::size_t kReadBufferSize = 16 * 1024;
// A chunk-size line or a trailer field.
constexpr std::size_t kChunkLineLimit = 4096;
// After answering a request whose body was left unread, the rest of the body is read and
// dropped for at most this long / this much, so the client sees the answer instead of a
// reset (a "lingering close").
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr std::size_t kLingerBytes = 16 * 1024 * 1024;

// ---- One connection's byte stream, plain or TLS, buffered ------------------------------------

class Connection {
 public:
  Connection(int fd, TlsSession* tls, Duration readTimeout, Duration writeTimeout)
      : fd_(fd), tls_(tls), readTimeout_(readTimeout), writeTimeout_(writeTimeout) {}

  enum class Read { Ok, Closed, TooLarge };

  // Waits up to `timeout` for the first byte of a next request, giving up early when
  // `giveUp` says so (checked every 50 ms).
  bool waitForRequest(Duration timeout, const std::function<bool()>& giveUp) const {
    if (hasBuffered())
      return true;
    auto deadline = Clock::now() + timeout;
    for (;;) {
      auto slice = std::min(deadline, Clock::now() + std::chrono::milliseconds(50));
      if (waitForFd(fd_, POLLIN, slice))
        return true;
      if (Clock::now() >= deadline || giveUp())
        return false;
    }
  }

  // The next request head, up to and including its empty line, at most `limit` bytes; it
  // stays valid until the next read.
  Read readHead(size_t limit, std::string_view& head) {
    size_t scanned = 0;
    for (;;) {
      std::string_view buffered(buf_.data() + begin_, end_ - begin_);
      // Leading empty lines do not start a request (RFC 9112 §2.2).
      while (buffered.starts_with("\r\n")) {
        begin_ += 2;
        buffered.remove_prefix(2);
      }
      auto end = buffered.find("\r\n\r\n", scanned);
      if (end != std::string_view::npos && end + 4 <= limit) {
        head = buffered.substr(0, end + 4);
        begin_ += end + 4;
        return Read::Ok;
      }
      if (buffered.size() >= limit)
        return Read::TooLarge;
      scanned = buffered.size() >= 3 ? buffered.size() - 3 : 0;
      if (!fill())
        return Read::Closed;
    }
  }

  // One line without its CRLF, at most `limit` bytes (chunk sizes, trailers).
  Read readLine(size_t limit, std::string& line) {
    size_t scanned = 0;
    for (;;) {
      std::string_view buffered(buf_.data() + begin_, end_ - begin_);
      auto end = buffered.find("\r\n", scanned);
      if (end != std::string_view::npos && end <= limit) {
        line.assign(buffered.substr(0, end));
        begin_ += end + 2;
        return Read::Ok;
      }
      if (buffered.size() > limit + 1)
        return Read::TooLarge;
      scanned = buffered.empty() ? 0 : buffered.size() - 1;
      if (!fill())
        return Read::Closed;
    }
  }

  // Appends exactly `n` bytes to `out`; false when the connection ends first.
  bool readExact(size_t n, std::string& out) {
    size_t target = out.size() + n;
    while (out.size() < target) {
      size_t want = target - out.size();
      if (begin_ < end_) {
        size_t take = std::min(want, end_ - begin_);
        out.append(buf_.data() + begin_, take);
        begin_ += take;
      } else if (want >= kReadBufferSize) {
        // Large bodies go straight into place.
        size_t old = out.size();
        out.resize(target);
        ssize_t got = rawRead(out.data() + old, want);
        out.resize(old + static_cast<size_t>(std::max<ssize_t>(got, 0)));
        if (got <= 0)
          return false;
      } else if (!fill()) {
        return false;
      }
    }
    return true;
  }

  bool writeAll(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = write(data.data(), data.size());
      if (n <= 0)
        return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

 private:
  bool hasBuffered() const { return begin_ < end_ || (tls_ != nullptr && tls_->pending()); }

  // Reads what the socket has into the buffer; false on end of stream, error or timeout.
  bool fill() {
    if (begin_ == end_) {
      begin_ = end_ = 0;
    } else if (end_ == buf_.size()) {
      if (begin_ > 0) {
        std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
      } else {
        buf_.resize(buf_.size() * 2);  // a head over the buffer: bounded by its limit
      }
    }
    ssize_t n = rawRead(buf_.data() + end_, buf_.size() - end_);
    if (n <= 0)
      return false;
    end_ += static_cast<size_t>(n);
    return true;
  }

  ssize_t write(const char* ptr, size_t size) {
    auto deadline = Clock::now() + writeTimeout_;
    if (tls_ != nullptr)
      return tls_->write(ptr, size, deadline);
    for (;;) {
      ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
      if (n >= 0)
        return n;
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        return -1;
      if (!waitForFd(fd_, POLLOUT, deadline))
        return -1;
    }
  }

  ssize_t rawRead(char* ptr, size_t size) {
    auto deadline = Clock::now() + readTimeout_;
    if (tls_ != nullptr)
      return tls_->read(ptr, size, deadline);
    for (;;) {
      ssize_t n = ::recv(fd_, ptr, size, 0);
      if (n >= 0)
        return n;
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        return -1;
      if (!waitForFd(fd_, POLLIN, deadline))
        return -1;
    }
  }

  int fd_;
  TlsSession* tls_;
  Duration readTimeout_;
  Duration writeTimeout_;
  std::vector<char> buf_ = std::vector<char>(kReadBufferSize);
  size_t begin_ = 0;  // unread bytes are buf_[begin_, end_)
  size_t end_ = 0;
};

// A fixed pool of workers with a bounded wait queue; a connection beyond the queue is
// refused at once. `waiting` counts the connections no idle worker is about to take, for
// idle keep-alive connections, which give their worker up while others wait.
class ConnectionWorkers {
 public:
  using Serve = std::function<void(UniqueFd)>;

  ConnectionWorkers(size_t workers, size_t maxQueued, std::atomic<size_t>& waiting, Serve serve)
      : maxQueued_(maxQueued), waiting_(waiting), serve_(std::move(serve)) {
    workers = std::max<size_t>(workers, 1);
    threads_.reserve(workers);
    for (size_t i = 0; i < workers; ++i)
      threads_.emplace_back([this] { work(); });
  }
  ~ConnectionWorkers() { shutdown(); }
  ConnectionWorkers(const ConnectionWorkers&) = delete;
  ConnectionWorkers& operator=(const ConnectionWorkers&) = delete;

  // False, leaving `fd` with the caller, when the queue is full or shutting down.
  bool submit(UniqueFd& fd) {
    {
      std::lock_guard lock(mutex_);
      if (shutdown_ || queue_.size() >= idle_ + maxQueued_)
        return false;
      queue_.push_back(std::move(fd));
      publishWaiting();
    }
    cv_.notify_one();
    return true;
  }

  // Closes the connections still queued and joins the workers.
  void shutdown() {
    {
      std::lock_guard lock(mutex_);
      shutdown_ = true;
      queue_.clear();
      publishWaiting();
    }
    cv_.notify_all();
    threads_.clear();
  }

 private:
  // Connections queued beyond the idle workers about to take them (under mutex_).
  void publishWaiting() { waiting_ = queue_.size() > idle_ ? queue_.size() - idle_ : 0; }

  void work() {
    for (;;) {
      UniqueFd fd;
      {
        std::unique_lock lock(mutex_);
        ++idle_;
        cv_.wait(lock, [this] { return shutdown_ || !queue_.empty(); });
        --idle_;
        if (queue_.empty())
          return;
        fd = std::move(queue_.front());
        queue_.pop_front();
        publishWaiting();
      }
      serve_(std::move(fd));
    }
  }

  const size_t maxQueued_;
  std::atomic<size_t>& waiting_;
  Serve serve_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<UniqueFd> queue_;
  size_t idle_ = 0;
  bool shutdown_ = false;
  std::vector<std::jthread> threads_;
};

HttpResponse plainResponse(int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

std::string upper(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

// ---- HttpRequest ---------------------------------------------------------------------------

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (equalsIgnoreCase(k, name))
      return v;
  }
  return {};
}

bool HttpRequest::hasHeader(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(),
                     [&](const auto& kv) { return equalsIgnoreCase(kv.first, name); });
}

std::string HttpRequest::queryParam(std::string_view name) const {
  for (const auto& [k, v] : query) {
    if (k == name)
      return v;
  }
  return {};
}

bool HttpRequest::hasQueryParam(std::string_view name) const {
  return std::any_of(query.begin(), query.end(), [&](const auto& kv) { return kv.first == name; });
}

// ---- The server ----------------------------------------------------------------------------

struct HttpServer::Impl {
  explicit Impl(HttpServerOptions o);

  HttpServerOptions options;
  std::string host;
  int requestedPort = 0;

  std::shared_mutex routesMutex;
  std::map<std::string, std::map<std::string, HttpHandler>> routes;  // path -> method -> h

  std::unique_ptr<TlsServerContext> tls;  // null: plain HTTP

  // Listener lifecycle, guarded by stateMutex.
  std::mutex stateMutex;
  std::condition_variable stateCv;
  bool started = false;
  std::atomic<bool> stopping{false};
  UniqueFd listenFd;
  std::unique_ptr<ConnectionWorkers> workers;
  std::jthread thread;
  std::atomic<int> port{0};

  std::mutex connMutex;
  std::set<int> connections;
  std::atomic<size_t> waitingConnections{0};
  std::atomic<size_t> rejected{0};
  std::atomic<int64_t> lastRejectLog{0};

  Result<void> bindListener();
  void serveLoop();
  void acceptConnections();
  void serveConnection(UniqueFd fd);
  void lingeringClose(int fd);
  void noteRejected();
  bool registerConnection(int fd);
  void unregisterConnection(int fd);

  // What the connection does after a request was answered.
  enum class After { KeepAlive, Close, DrainAndClose };
  enum class BodyRead { Ok, Closed, TooLarge, Malformed };
  // Reads, routes and answers one request; `remaining` counts it among the requests the
  // connection may still serve.
  After serveRequest(Connection& connection, const std::string& remoteAddr, int remotePort,
                     size_t remaining);
  BodyRead readBody(Connection& connection, const RequestHead& head, std::string& body);
  After answer(Connection& connection, const RequestHead& head, size_t remaining,
               const HttpResponse& response);
  bool respond(Connection& connection, const HttpResponse& response, bool headOnly, bool close,
               size_t keepAliveMax);
};

HttpServer::Impl::Impl(HttpServerOptions o) : options(std::move(o)) {}

Result<void> HttpServer::Impl::bindListener() {
  auto fd = openListener(host, requestedPort);
  if (!fd)
    return fail(fd.error());
  port = boundPort(fd->get());
  listenFd = std::move(*fd);
  return {};
}

// Hands accepted connections to the workers until the listener is shut down or fails.
void HttpServer::Impl::acceptConnections() {
  for (;;) {
    int accepted = ::accept4(listenFd.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (accepted >= 0) {
      UniqueFd fd(accepted);
      if (stopping || !workers->submit(fd))
        noteRejected();  // closed as `fd` goes
      continue;
    }
    int err = errno;
    if (err == EINTR || err == ECONNABORTED || err == EPROTO || err == EPERM)
      continue;
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
      // Out of descriptors or memory: the backlog holds new connections while workers
      // finish theirs; pause instead of spinning on the same error.
      log::warn("HTTP accept failed; pausing",
                {{"server", options.name}, {"error", errnoText(err)}});
      std::unique_lock lock(stateMutex);
      if (stateCv.wait_for(lock, std::chrono::milliseconds(100),
                           [this] { return stopping.load(); }))
        return;
      continue;
    }
    if (!stopping) {
      log::error("HTTP accept failed", {{"server", options.name}, {"error", errnoText(err)}});
    }
    return;
  }
}

void HttpServer::Impl::serveLoop() {
  auto reopen = [this](std::unique_lock<std::mutex>& lock) {
    log::error("HTTP listener failed; opening it again",
               {{"server", options.name}, {"port", port.load()}});
    for (;;) {
      if (stateCv.wait_for(lock, std::chrono::seconds(1), [this] { return stopping.load(); }))
        return false;
      requestedPort = port;
      auto bound = bindListener();
      if (bound)
        return true;
      log::error("HTTP listener could not be opened again",
                 {{"server", options.name}, {"error", bound.error().message}});
    }
  };
  for (;;) {
    acceptConnections();
    std::unique_lock lock(stateMutex);
    listenFd.reset();
    if (stopping || !reopen(lock))
      break;
  }
  workers->shutdown();
}

void HttpServer::Impl::noteRejected() {
  size_t total = ++rejected;
  int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
          .count();
  int64_t last = lastRejectLog.load();
  if (!stopping && now - last >= 10000 && lastRejectLog.compare_exchange_strong(last, now)) {
    log::warn("HTTP server busy: closing new connections", {{"server", options.name},
                                                            {"workers", options.workers},
                                                            {"maxQueued", options.maxQueued},
                                                            {"rejectedTotal", total}});
  }
}

bool HttpServer::Impl::registerConnection(int fd) {
  std::lock_guard lock(connMutex);
  if (stopping)
    return false;
  connections.insert(fd);
  return true;
}

void HttpServer::Impl::unregisterConnection(int fd) {
  std::lock_guard lock(connMutex);
  connections.erase(fd);
}

void HttpServer::Impl::lingeringClose(int fd) {
  ::shutdown(fd, SHUT_WR);
  auto deadline = Clock::now() + kLingerTime;
  size_t drained = 0;
  std::array<char, 16 * 1024> sink{};
  while (drained < kLingerBytes && !stopping && waitForFd(fd, POLLIN, deadline)) {
    ssize_t n = ::recv(fd, sink.data(), sink.size(), 0);
    if (n == 0)
      break;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
        continue;
      break;
    }
    drained += static_cast<size_t>(n);
  }
}

void HttpServer::Impl::serveConnection(UniqueFd fd) {
  if (!registerConnection(fd.get()))
    return;
  try {
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::unique_ptr<TlsSession> session;
    if (tls)
      session = tls->accept(fd.get(), Clock::now() + options.readTimeout);
    if (!tls || session) {
      auto [remoteAddr, remotePort] = peerAddress(fd.get());
      Connection connection(fd.get(), session.get(), options.readTimeout, options.writeTimeout);
      size_t remaining = std::max<size_t>(options.keepAliveMaxRequests, 1);
      bool first = true;
      // The first request may take the read timeout to arrive; between requests an idle
      // connection waits for the keep-alive timeout, or less when connections are queued
      // for a worker (the client reconnects when it needs to).
      auto giveUp = [&] { return stopping || (!first && waitingConnections > 0); };
      After after = After::Close;
      while (remaining > 0 && !stopping &&
             connection.waitForRequest(first ? options.readTimeout : options.keepAliveTimeout,
                                       giveUp)) {
        first = false;
        after = serveRequest(connection, remoteAddr, remotePort, remaining);
        if (after != After::KeepAlive)
          break;
        --remaining;
      }
      if (session)
        session->shutdown();
      if (after == After::DrainAndClose)
        lingeringClose(fd.get());
    }
  } catch (const std::exception& e) {
    log::error("HTTP connection failed", {{"server", options.name}, {"error", e.what()}});
  } catch (...) {
    log::error("HTTP connection failed", {{"server", options.name}});
  }
  unregisterConnection(fd.get());
}

HttpServer::Impl::After HttpServer::Impl::serveRequest(Connection& connection,
                                                       const std::string& remoteAddr,
                                                       int remotePort, size_t remaining) {
  // Answers that end the connection: the rest of the input cannot be trusted, or a body
  // was left unread.
  auto refuse = [&](int status, std::string_view why, HttpFields headers = {}) {
    HttpResponse response = plainResponse(status, std::string(why) + "\n");
    response.headers = std::move(headers);
    respond(connection, response, false, true, 0);
    return After::DrainAndClose;
  };

  std::string_view headText;
  switch (connection.readHead(kHeaderBudget, headText)) {
    case Connection::Read::Ok:
      break;
    case Connection::Read::Closed:
      return After::Close;
    case Connection::Read::TooLarge:
      return refuse(431, "request header fields too large");
  }
  auto parsed = parseRequestHead(headText);
  if (!parsed)
    return refuse(parsed.error().status, parsed.error().reason);
  RequestHead& head = *parsed;
  const bool hasBody = head.framing != BodyFraming::None;
  const bool headOnly = head.method == "HEAD";

  HttpHandler handler;
  std::string allowed;
  {
    std::shared_lock lock(routesMutex);
    auto path = routes.find(head.path);
    if (path != routes.end()) {
      const auto& methods = path->second;
      auto m = methods.find(head.method);
      if (m == methods.end() && headOnly)
        m = methods.find("GET");
      if (m != methods.end()) {
        handler = m->second;
      } else {
        // The Allow field of a 405, only when one is owed.
        for (const auto& [name, h] : methods) {
          if (!allowed.empty())
            allowed += ", ";
          allowed += name;
          if (name == "GET" && !methods.contains("HEAD"))
            allowed += ", HEAD";
        }
      }
    }
  }
  if (!handler) {
    if (allowed.empty())
      return hasBody ? refuse(404, "not found")
                     : answer(connection, head, remaining, plainResponse(404, "not found\n"));
    if (hasBody)
      return refuse(405, "method not allowed", {{"Allow", allowed}});
    HttpResponse response = head.method == "OPTIONS" ? plainResponse(204, "")
                                                     : plainResponse(405, "method not allowed\n");
    response.headers.emplace_back("Allow", std::move(allowed));
    return answer(connection, head, remaining, response);
  }

  HttpRequest request;
  if (hasBody) {
    if (head.framing == BodyFraming::ContentLength && head.contentLength > options.maxBodyBytes)
      return refuse(413, "request body too large");
    if (head.expectContinue && !connection.writeAll("HTTP/1.1 100 Continue\r\n\r\n"))
      return After::Close;
    switch (readBody(connection, head, request.body)) {
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

  HttpResponse response;
  try {
    response = handler(request);
  } catch (const std::exception& e) {
    log::error("HTTP handler failed", {{"server", options.name},
                                       {"method", request.method},
                                       {"path", request.path},
                                       {"error", e.what()}});
    response = plainResponse(500, "internal server error\n");
  } catch (...) {
    log::error("HTTP handler failed",
               {{"server", options.name}, {"method", request.method}, {"path", request.path}});
    response = plainResponse(500, "internal server error\n");
  }
  return answer(connection, head, remaining, response);
}

HttpServer::Impl::After HttpServer::Impl::answer(Connection& connection, const RequestHead& head,
                                                 size_t remaining, const HttpResponse& response) {
  bool close = !head.keepAlive || remaining <= 1 || stopping;
  for (const auto& [name, value] : response.headers) {
    if (equalsIgnoreCase(name, "Connection") && equalsIgnoreCase(trim(value), "close"))
      close = true;
  }
  if (!respond(connection, response, head.method == "HEAD", close, remaining - 1))
    return After::Close;
  return close ? After::Close : After::KeepAlive;
}

HttpServer::Impl::BodyRead HttpServer::Impl::readBody(Connection& connection,
                                                      const RequestHead& head, std::string& body) {
  if (head.framing == BodyFraming::ContentLength) {
    body.reserve(head.contentLength);
    return connection.readExact(head.contentLength, body) ? BodyRead::Ok : BodyRead::Closed;
  }
  std::string line;
  auto next = [&](size_t limit) -> std::optional<BodyRead> {
    switch (connection.readLine(limit, line)) {
      case Connection::Read::Ok:
        return std::nullopt;
      case Connection::Read::Closed:
        return BodyRead::Closed;
      case Connection::Read::TooLarge:
        return BodyRead::Malformed;
    }
    return BodyRead::Malformed;
  };
  // Framing may add to the body's size, within a bound: many tiny chunks with long
  // extensions must not keep a worker reading without end.
  size_t framing = 0;
  const size_t maxFraming = kHeaderBudget + 8 * options.maxBodyBytes;
  for (;;) {
    if (auto failed = next(kChunkLineLimit))
      return *failed;
    framing += line.size() + 4;
    if (framing > maxFraming)
      return BodyRead::Malformed;
    auto size = parseChunkSize(line);
    if (!size)
      return BodyRead::Malformed;
    if (*size == 0)
      break;
    if (*size > options.maxBodyBytes - body.size())
      return BodyRead::TooLarge;
    if (!connection.readExact(*size, body))
      return BodyRead::Closed;
    if (auto failed = next(0))  // the CRLF after the chunk's data
      return *failed;
  }
  // Trailer fields are read and dropped, within the head's budget.
  size_t trailers = 0;
  for (;;) {
    if (auto failed = next(kChunkLineLimit))
      return *failed;
    if (line.empty())
      return BodyRead::Ok;
    trailers += line.size() + 2;
    if (trailers > kHeaderBudget)
      return BodyRead::Malformed;
  }
}

bool HttpServer::Impl::respond(Connection& connection, const HttpResponse& response, bool headOnly,
                               bool close, size_t keepAliveMax) {
  std::string_view contentType = response.contentType;
  for (const auto& [name, value] : response.headers) {
    if (equalsIgnoreCase(name, "Content-Type"))
      contentType = value;
  }
  std::string out;
  out.reserve(192 + response.body.size());
  appendResponseHead(out,
                     {.status = response.status,
                      .contentType = contentType,
                      .contentLength = response.body.size(),
                      .extra = &response.headers,
                      .close = close,
                      .keepAliveSeconds =
                          std::chrono::ceil<std::chrono::seconds>(options.keepAliveTimeout).count(),
                      .keepAliveMax = keepAliveMax});
  if (!headOnly && !statusHasNoBody(response.status))
    out += response.body;
  return connection.writeAll(out);
}

// ---- HttpServer ----------------------------------------------------------------------------

HttpServer::HttpServer(PassKey, std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  stop();
}

Result<std::unique_ptr<HttpServer>> HttpServer::create(HttpServerOptions options) {
  auto address = parseListenAddress(options.address);
  if (!address)
    return fail(address.error());
  if (options.maxBodyBytes == 0)
    return fail("maxBodyBytes must be positive");
  if (options.readTimeout <= Duration::zero() || options.writeTimeout <= Duration::zero() ||
      options.keepAliveTimeout <= Duration::zero()) {
    return fail("HTTP timeouts must be positive");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  impl->host = address->first;
  impl->requestedPort = address->second;
  const auto& o = impl->options;
  if (o.tls || o.certificate || !o.certFile.empty() || !o.keyFile.empty()) {
    auto tls = TlsServerContext::create({.certFile = o.certFile,
                                         .keyFile = o.keyFile,
                                         .certificate = o.certificate,
                                         .checkInterval = o.certificateCheckInterval,
                                         .name = o.name});
    if (!tls)
      return fail(tls.error());
    impl->tls = std::move(*tls);
  }
  return std::make_unique<HttpServer>(PassKey{}, std::move(impl));
}

void HttpServer::handle(std::string method, std::string path, HttpHandler handler) {
  std::unique_lock lock(impl_->routesMutex);
  impl_->routes[std::move(path)][upper(std::move(method))] = std::move(handler);
}

Result<void> HttpServer::start() {
  std::lock_guard lock(impl_->stateMutex);
  if (impl_->stopping)
    return fail("HTTP server " + impl_->options.name + " was stopped");
  if (impl_->started)
    return fail("HTTP server " + impl_->options.name + " already started");
  if (auto r = impl_->bindListener(); !r)
    return r;
  impl_->started = true;
  Impl* self = impl_.get();
  impl_->workers = std::make_unique<ConnectionWorkers>(
      self->options.workers, self->options.maxQueued, self->waitingConnections,
      [self](UniqueFd fd) { self->serveConnection(std::move(fd)); });
  impl_->thread = std::jthread([self] { self->serveLoop(); });
  log::info("HTTP server listening", {{"server", impl_->options.name},
                                      {"address", impl_->options.address},
                                      {"port", impl_->port.load()},
                                      {"tls", impl_->tls != nullptr}});
  return {};
}

int HttpServer::port() const {
  return impl_->port;
}

void HttpServer::stop() {
  {
    std::lock_guard lock(impl_->stateMutex);
    impl_->stopping = true;
    // Wakes the accept loop: accept fails, the loop ends and the workers are joined.
    if (impl_->listenFd.get() >= 0)
      ::shutdown(impl_->listenFd.get(), SHUT_RDWR);
  }
  impl_->stateCv.notify_all();
  {
    // Wakes workers blocked on idle or slow connections.
    std::lock_guard lock(impl_->connMutex);
    for (int fd : impl_->connections)
      ::shutdown(fd, SHUT_RDWR);
  }
  if (impl_->thread.joinable())
    impl_->thread.join();
}

bool HttpServer::tls() const {
  return impl_->tls != nullptr;
}

Result<void> HttpServer::setCertificate(const PemKeyPair& pair) {
  if (!impl_->tls)
    return fail("HTTP server " + impl_->options.name + " does not serve TLS");
  return impl_->tls->setCertificate(pair);
}

std::optional<std::chrono::system_clock::time_point> HttpServer::certificateNotAfter() const {
  return impl_->tls ? impl_->tls->certificateNotAfter() : std::nullopt;
}

size_t HttpServer::rejectedConnections() const {
  return impl_->rejected;
}

size_t HttpServer::openConnections() const {
  std::lock_guard lock(impl_->connMutex);
  return impl_->connections.size();
}

}  // namespace gvirtus
