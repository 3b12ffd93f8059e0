#include "common/http_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
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
#include <unordered_map>

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
// How often the reader closes the connections past their deadlines.
constexpr auto kDeadlineSweep = std::chrono::milliseconds(50);
// Warnings about refused connections: at most one per kind in this time.
constexpr int64_t kRefusalLogMillis = 10000;

// ---- One connection's byte stream, plain or TLS, buffered ------------------------------------

class Connection {
 public:
  Connection(int fd, TlsSession* tls, Duration readTimeout, Duration writeTimeout)
      : fd_(fd), tls_(tls), readTimeout_(readTimeout), writeTimeout_(writeTimeout) {}

  enum class Read { Ok, Closed, TooLarge };
  // What a read that may not wait found.
  enum class Fill { Got, WantRead, WantWrite, Closed };

  // Reads that wait end by this time at the latest: the deadline of the request.
  void setReadDeadline(Clock::time_point deadline) { readDeadline_ = deadline; }

  // The bytes read and not yet taken.
  std::string_view buffered() const { return {buf_.data() + begin_, end_ - begin_}; }

  // Leading empty lines do not start a request (RFC 9112 §2.2).
  void skipEmptyLines() {
    while (end_ - begin_ >= 2 && buf_[begin_] == '\r' && buf_[begin_ + 1] == '\n')
      begin_ += 2;
  }

  // Reads what the socket has now into the buffer, without waiting.
  Fill fillNow() {
    makeRoom();
    char* at = buf_.data() + end_;
    size_t room = buf_.size() - end_;
    if (tls_ != nullptr) {
      size_t got = 0;
      switch (tls_->readSome(at, room, got)) {
        case TlsSession::Step::Done:
          end_ += got;
          return Fill::Got;
        case TlsSession::Step::WantRead:
          return Fill::WantRead;
        case TlsSession::Step::WantWrite:
          return Fill::WantWrite;
        case TlsSession::Step::Closed:
        case TlsSession::Step::Failed:
          return Fill::Closed;
      }
      return Fill::Closed;
    }
    for (;;) {
      ssize_t n = ::recv(fd_, at, room, MSG_DONTWAIT);
      if (n > 0) {
        end_ += static_cast<size_t>(n);
        return Fill::Got;
      }
      if (n == 0)
        return Fill::Closed;
      if (errno == EINTR)
        continue;
      return errno == EAGAIN || errno == EWOULDBLOCK ? Fill::WantRead : Fill::Closed;
    }
  }

  // Writes `data` without waiting; false when the socket does not take all of it at once
  // (short answers of the reader: 100 Continue, 408, 503).
  bool writeNow(std::string_view data) {
    while (!data.empty()) {
      size_t moved = 0;
      if (tls_ != nullptr) {
        if (tls_->writeSome(data.data(), data.size(), moved) != TlsSession::Step::Done)
          return false;
      } else {
        ssize_t n = ::send(fd_, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
          continue;
        if (n <= 0)
          return false;
        moved = static_cast<size_t>(n);
      }
      data.remove_prefix(moved);
    }
    return true;
  }

  // The next request head, up to and including its empty line, at most `limit` bytes; it
  // stays valid until the next read.
  Read readHead(size_t limit, std::string_view& head) {
    size_t scanned = 0;
    for (;;) {
      skipEmptyLines();
      std::string_view pending = buffered();
      auto end = pending.find("\r\n\r\n", scanned);
      if (end != std::string_view::npos && end + 4 <= limit) {
        head = pending.substr(0, end + 4);
        begin_ += end + 4;
        return Read::Ok;
      }
      if (pending.size() >= limit)
        return Read::TooLarge;
      scanned = pending.size() >= 3 ? pending.size() - 3 : 0;
      if (!fill())
        return Read::Closed;
    }
  }

  // One line without its CRLF, at most `limit` bytes (chunk sizes, trailers).
  Read readLine(size_t limit, std::string& line) {
    size_t scanned = 0;
    for (;;) {
      std::string_view pending = buffered();
      auto end = pending.find("\r\n", scanned);
      if (end != std::string_view::npos && end <= limit) {
        line.assign(pending.substr(0, end));
        begin_ += end + 2;
        return Read::Ok;
      }
      if (pending.size() > limit + 1)
        return Read::TooLarge;
      scanned = pending.empty() ? 0 : pending.size() - 1;
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
  // Space after end_: the unread bytes moved to the front, or the buffer doubled when they
  // fill it (a request over the buffer: bounded by the limits of its reader).
  void makeRoom() {
    if (begin_ == end_) {
      begin_ = end_ = 0;
    } else if (end_ == buf_.size()) {
      if (begin_ > 0) {
        std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
      } else {
        buf_.resize(buf_.size() * 2);
      }
    }
  }

  // Reads what the socket has into the buffer, waiting for it; false on end of stream,
  // error or timeout.
  bool fill() {
    makeRoom();
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
    auto deadline = std::min(Clock::now() + readTimeout_, readDeadline_);
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
  Clock::time_point readDeadline_ = Clock::time_point::max();
  std::vector<char> buf_ = std::vector<char>(kReadBufferSize);
  size_t begin_ = 0;  // unread bytes are buf_[begin_, end_)
  size_t end_ = 0;
};

// ---- The open connections, by peer -----------------------------------------------------------

class ConnectionRegistry {
 public:
  enum class Admit { Ok, PeerFull, ServerFull, Stopping };

  Admit admit(int fd, const std::string& peer, size_t perPeer, size_t total) {
    std::lock_guard lock(mutex_);
    if (stopping_)
      return Admit::Stopping;
    if (fds_.size() >= total)
      return Admit::ServerFull;
    size_t& count = peers_[peer];
    if (count >= perPeer)
      return Admit::PeerFull;  // the entry exists: this peer has connections open
    ++count;
    fds_.insert(fd);
    return Admit::Ok;
  }

  void release(int fd, const std::string& peer) {
    std::lock_guard lock(mutex_);
    fds_.erase(fd);
    auto it = peers_.find(peer);
    if (it != peers_.end() && --it->second == 0)
      peers_.erase(it);
  }

  // Admits nothing more and shuts every open connection down: whatever waits on one wakes.
  void shutdownAll() {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (int fd : fds_)
      ::shutdown(fd, SHUT_RDWR);
  }

  size_t size() const {
    std::lock_guard lock(mutex_);
    return fds_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::set<int> fds_;
  std::unordered_map<std::string, size_t> peers_;
  bool stopping_ = false;
};

// ---- One client connection, between the reader and the workers --------------------------------

// Where a connection is while the reader holds it.
enum class Phase {
  Handshake,  // TLS, until handshakeTimeout
  Idle,       // before a request's first byte: readTimeout, or keepAliveTimeout between two
  Reading,    // a request has begun: its head and body until requestTimeout
  Draining,   // answered and closing: what it still sends is dropped, for kLingerTime
};

// Owned by one thread at a time: the reader while it waits for bytes, a worker while it
// serves a request.
struct Client {
  Client(ConnectionRegistry& reg, UniqueFd socket, std::pair<std::string, int> peer,
         std::unique_ptr<TlsSession> session, const HttpServerOptions& options)
      : registry(reg),
        fd(std::move(socket)),
        addr(std::move(peer.first)),
        port(peer.second),
        tls(std::move(session)),
        stream(fd.get(), tls.get(), options.readTimeout, options.writeTimeout),
        scanner(RequestLimits{kHeaderBudget, options.maxBodyBytes, kChunkLineLimit}),
        remaining(std::max<size_t>(options.keepAliveMaxRequests, 1)) {}
  // Leaves the registry before the socket closes, so that stop() never shuts down a
  // descriptor number that was reused.
  ~Client() {
    if (admitted)
      registry.release(fd.get(), addr);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  ConnectionRegistry& registry;
  UniqueFd fd;
  std::string addr;
  int port;
  std::unique_ptr<TlsSession> tls;
  Connection stream;
  RequestScanner scanner;
  // Requests it may still serve.
  size_t remaining;
  bool admitted = false;
  Phase phase = Phase::Idle;
  Clock::time_point deadline;
  bool continueSent = false;
  size_t drained = 0;
  uint32_t watched = 0;  // the epoll events it is registered for; 0: none
};

// Answers with `status`, closes the sending side and drops what the client still sends.
void answerAndDrain(Client& client, int status, std::string_view body) {
  std::string out;
  appendResponseHead(out, {.status = status,
                           .contentType = "text/plain; charset=utf-8",
                           .contentLength = body.size(),
                           .close = true});
  out += body;
  client.stream.writeNow(out);  // best effort: the connection closes either way
  if (client.tls)
    client.tls->shutdown();
  ::shutdown(client.fd.get(), SHUT_WR);
  client.phase = Phase::Draining;
  client.deadline = Clock::now() + kLingerTime;
  client.drained = 0;
}

// ---- The reader: every connection that waits for bytes, on one thread --------------------------

// Handshakes, waits between requests and reads requests until they are whole, for every
// connection at once, and hands complete requests to the workers. A client that trickles
// its bytes costs a buffer here, never a worker, and is closed at its deadline.
class ConnectionReader {
 public:
  struct Settings {
    Duration readTimeout;
    Duration requestTimeout;
    std::string name;
  };
  struct Hooks {
    // Takes the client to a worker, or leaves it (every worker busy and the queue full).
    std::function<bool(std::unique_ptr<Client>&)> dispatch;
    std::function<void()> overloaded;
    // A request or handshake missed its deadline (`what` says which).
    std::function<void(const Client&, std::string_view what)> timedOut;
  };

  static Result<std::unique_ptr<ConnectionReader>> create(Settings settings, Hooks hooks) {
    UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll.valid())
      return fail("epoll_create1: " + errnoText(errno));
    UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake.valid())
      return fail("eventfd: " + errnoText(errno));
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = wake.get();
    if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, wake.get(), &event) != 0)
      return fail("epoll_ctl: " + errnoText(errno));
    return std::make_unique<ConnectionReader>(std::move(settings), std::move(hooks),
                                              std::move(epoll), std::move(wake));
  }
  ConnectionReader(Settings settings, Hooks hooks, UniqueFd epoll, UniqueFd wake)
      : settings_(std::move(settings)),
        hooks_(std::move(hooks)),
        epoll_(std::move(epoll)),
        wake_(std::move(wake)),
        thread_([this] { loop(); }) {}
  ~ConnectionReader() { stop(); }
  ConnectionReader(const ConnectionReader&) = delete;
  ConnectionReader& operator=(const ConnectionReader&) = delete;

  // Takes a connection whose phase and deadline are set (any thread); once stopped, closes
  // it instead.
  void add(std::unique_ptr<Client> client) {
    {
      std::lock_guard lock(mutex_);
      if (stopped_)
        return;
      arrived_.push_back(std::move(client));
    }
    ::eventfd_write(wake_.get(), 1);
  }

  // Closes every connection it holds and joins its thread. Idempotent.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    ::eventfd_write(wake_.get(), 1);
    if (thread_.joinable())
      thread_.join();
  }

 private:
  enum class Next { Wait, Dispatch, Close };

  void loop() {
    std::array<epoll_event, 64> events{};
    auto nextSweep = Clock::now() + kDeadlineSweep;
    for (;;) {
      auto wait = std::chrono::ceil<std::chrono::milliseconds>(nextSweep - Clock::now());
      int n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()),
                           static_cast<int>(std::max<int64_t>(wait.count(), 0)));
      if (n < 0 && errno != EINTR) {
        log::error("HTTP reader failed", {{"server", settings_.name}, {"error", errnoText(errno)}});
        break;
      }
      bool woken = false;
      for (int i = 0; i < n; ++i) {
        if (events[static_cast<size_t>(i)].data.fd == wake_.get()) {
          woken = true;
        } else {
          int fd = events[static_cast<size_t>(i)].data.fd;
          if (auto it = clients_.find(fd); it != clients_.end())
            advance(*it->second);
        }
      }
      if (woken) {
        eventfd_t ignored = 0;
        ::eventfd_read(wake_.get(), &ignored);
        std::vector<std::unique_ptr<Client>> arrived;
        {
          std::lock_guard lock(mutex_);
          if (stopped_)
            break;
          arrived.swap(arrived_);
        }
        for (auto& client : arrived)
          take(std::move(client));
      }
      auto now = Clock::now();
      if (now >= nextSweep) {
        sweep(now);
        nextSweep = now + kDeadlineSweep;
      }
    }
    std::lock_guard lock(mutex_);
    stopped_ = true;
    arrived_.clear();
    clients_.clear();
  }

  void take(std::unique_ptr<Client> client) {
    Client& c = *client;
    clients_.emplace(c.fd.get(), std::move(client));
    advance(c);
  }

  void advance(Client& c) {
    switch (step(c)) {
      case Next::Wait:
        return;
      case Next::Dispatch:
        dispatch(c.fd.get());
        return;
      case Next::Close:
        close(c.fd.get());
        return;
    }
  }

  Next step(Client& c) {
    if (c.phase == Phase::Handshake) {
      switch (c.tls->handshake()) {
        case TlsSession::Step::Done:
          c.phase = Phase::Idle;
          c.deadline = Clock::now() + settings_.readTimeout;
          break;
        case TlsSession::Step::WantRead:
          return watch(c, EPOLLIN);
        case TlsSession::Step::WantWrite:
          return watch(c, EPOLLOUT);
        case TlsSession::Step::Closed:
        case TlsSession::Step::Failed:
          return Next::Close;
      }
    }
    if (c.phase == Phase::Draining)
      return drain(c);
    for (;;) {
      if (c.phase == Phase::Idle && !c.stream.buffered().empty()) {
        // The request's first byte: from now on its head and body have requestTimeout.
        c.phase = Phase::Reading;
        c.deadline = Clock::now() + settings_.requestTimeout;
      }
      if (c.phase == Phase::Reading) {
        c.stream.skipEmptyLines();
        if (c.scanner.scan(c.stream.buffered()) != RequestScanner::State::NeedMore)
          return Next::Dispatch;
        if (c.scanner.wantsContinue() && !c.continueSent) {
          c.continueSent = true;
          if (!c.stream.writeNow("HTTP/1.1 100 Continue\r\n\r\n"))
            return Next::Close;
        }
      }
      switch (c.stream.fillNow()) {
        case Connection::Fill::Got:
          continue;
        case Connection::Fill::WantRead:
          return watch(c, EPOLLIN);
        case Connection::Fill::WantWrite:
          return watch(c, EPOLLOUT);
        case Connection::Fill::Closed:
          return Next::Close;
      }
    }
  }

  // Reads and drops what the client still sends, then closes (a lingering close).
  Next drain(Client& c) {
    std::array<char, 16 * 1024> sink{};
    for (;;) {
      ssize_t n = ::recv(c.fd.get(), sink.data(), sink.size(), MSG_DONTWAIT);
      if (n > 0) {
        c.drained += static_cast<size_t>(n);
        if (c.drained >= kLingerBytes)
          return Next::Close;
        continue;
      }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return watch(c, EPOLLIN);
      return Next::Close;
    }
  }

  Next watch(Client& c, uint32_t events) {
    if (c.watched == events)
      return Next::Wait;
    epoll_event event{};
    event.events = events;
    event.data.fd = c.fd.get();
    int op = c.watched == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    if (::epoll_ctl(epoll_.get(), op, c.fd.get(), &event) != 0) {
      log::error("HTTP reader cannot watch a connection",
                 {{"server", settings_.name}, {"error", errnoText(errno)}});
      return Next::Close;
    }
    c.watched = events;
    return Next::Wait;
  }

  // Takes the client out of the reader's hands.
  std::unique_ptr<Client> release(int fd) {
    auto it = clients_.find(fd);
    std::unique_ptr<Client> client = std::move(it->second);
    clients_.erase(it);
    if (client->watched != 0) {
      ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
      client->watched = 0;
    }
    return client;
  }

  void close(int fd) { release(fd); }

  void dispatch(int fd) {
    std::unique_ptr<Client> client = release(fd);
    client->stream.setReadDeadline(client->deadline);
    if (hooks_.dispatch(client))
      return;
    hooks_.overloaded();
    answerAndDrain(*client, 503, "server busy\n");
    take(std::move(client));
  }

  void sweep(Clock::time_point now) {
    std::vector<int> expired;
    for (const auto& [fd, client] : clients_) {
      if (client->deadline <= now)
        expired.push_back(fd);
    }
    for (int fd : expired) {
      Client& c = *clients_.at(fd);
      switch (c.phase) {
        case Phase::Handshake:
          hooks_.timedOut(c, "TLS handshake");
          close(fd);
          break;
        case Phase::Reading:
          hooks_.timedOut(c, "request");
          answerAndDrain(c, 408, "request timeout\n");
          advance(c);
          break;
        case Phase::Idle:
        case Phase::Draining:
          close(fd);
          break;
      }
    }
  }

  const Settings settings_;
  const Hooks hooks_;
  UniqueFd epoll_;
  UniqueFd wake_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Client>> arrived_;  // under mutex_
  bool stopped_ = false;                          // under mutex_
  // Only the reader's thread touches these.
  std::unordered_map<int, std::unique_ptr<Client>> clients_;
  std::jthread thread_;
};

// A fixed pool of workers with a bounded wait queue, for requests that have arrived whole.
class RequestWorkers {
 public:
  using Serve = std::function<void(std::unique_ptr<Client>)>;

  RequestWorkers(size_t workers, size_t maxQueued, Serve serve)
      : maxQueued_(maxQueued), serve_(std::move(serve)) {
    workers = std::max<size_t>(workers, 1);
    threads_.reserve(workers);
    for (size_t i = 0; i < workers; ++i)
      threads_.emplace_back([this] { work(); });
  }
  ~RequestWorkers() { shutdown(); }
  RequestWorkers(const RequestWorkers&) = delete;
  RequestWorkers& operator=(const RequestWorkers&) = delete;

  // False, leaving `client` with the caller, when the queue is full or shutting down.
  bool submit(std::unique_ptr<Client>& client) {
    {
      std::lock_guard lock(mutex_);
      if (fullLocked())
        return false;
      queue_.push_back(std::move(client));
    }
    cv_.notify_one();
    return true;
  }

  // Every worker is busy and maxQueued requests wait.
  bool full() {
    std::lock_guard lock(mutex_);
    return fullLocked();
  }

  // Closes the connections still queued and joins the workers.
  void shutdown() {
    {
      std::lock_guard lock(mutex_);
      shutdown_ = true;
      queue_.clear();
    }
    cv_.notify_all();
    threads_.clear();
  }

 private:
  bool fullLocked() const { return shutdown_ || queue_.size() >= idle_ + maxQueued_; }

  void work() {
    for (;;) {
      std::unique_ptr<Client> client;
      {
        std::unique_lock lock(mutex_);
        ++idle_;
        cv_.wait(lock, [this] { return shutdown_ || !queue_.empty(); });
        --idle_;
        if (queue_.empty())
          return;
        client = std::move(queue_.front());
        queue_.pop_front();
      }
      serve_(std::move(client));
    }
  }

  const size_t maxQueued_;
  Serve serve_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Client>> queue_;
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

// At most one warning per kRefusalLogMillis through `last` (a steady-clock millisecond).
bool logDue(std::atomic<int64_t>& last) {
  int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
          .count();
  int64_t seen = last.load();
  return now - seen >= kRefusalLogMillis && last.compare_exchange_strong(seen, now);
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
  ConnectionRegistry registry;
  std::unique_ptr<RequestWorkers> workers;
  std::unique_ptr<ConnectionReader> reader;
  std::jthread thread;
  std::atomic<int> port{0};

  std::atomic<size_t> rejected{0};
  std::atomic<size_t> peerRejected{0};
  std::atomic<size_t> timedOut{0};
  std::atomic<int64_t> lastRejectLog{0};
  std::atomic<int64_t> lastPeerRejectLog{0};

  Result<void> bindListener();
  void serveLoop();
  void acceptConnections();
  void admit(UniqueFd fd);
  void serve(std::unique_ptr<Client> client);
  void noteRejected();
  void notePeerRejected(const std::string& peer);

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

// Hands accepted connections to the reader until the listener is shut down or fails.
void HttpServer::Impl::acceptConnections() {
  for (;;) {
    int accepted = ::accept4(listenFd.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (accepted >= 0) {
      admit(UniqueFd(accepted));
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

// A new connection goes to the reader, or is closed at once: the server is stopping or
// full, or its peer has maxConnectionsPerPeer open.
void HttpServer::Impl::admit(UniqueFd fd) {
  if (stopping)
    return;
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
    if (!session)
      return;
  }
  auto client = std::make_unique<Client>(registry, std::move(fd), peerAddress(socket),
                                         std::move(session), options);
  switch (
      registry.admit(socket, client->addr, options.maxConnectionsPerPeer, options.maxConnections)) {
    case ConnectionRegistry::Admit::Ok:
      client->admitted = true;
      break;
    case ConnectionRegistry::Admit::PeerFull:
      notePeerRejected(client->addr);
      return;
    case ConnectionRegistry::Admit::ServerFull:
      noteRejected();
      return;
    case ConnectionRegistry::Admit::Stopping:
      return;
  }
  auto now = Clock::now();
  if (tls) {
    client->phase = Phase::Handshake;
    client->deadline = now + options.handshakeTimeout;
  } else {
    client->phase = Phase::Idle;
    client->deadline = now + options.readTimeout;
  }
  reader->add(std::move(client));
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
  // The reader first: what a worker hands back afterwards is closed.
  reader->stop();
  workers->shutdown();
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

// Serves the request the reader found whole, then hands the connection back to the reader
// to wait for the next one (or to drain it), or closes it.
void HttpServer::Impl::serve(std::unique_ptr<Client> client) {
  Client& c = *client;
  After after = After::Close;
  try {
    after = serveRequest(c.stream, c.addr, c.port, c.remaining);
  } catch (const std::exception& e) {
    log::error("HTTP connection failed", {{"server", options.name}, {"error", e.what()}});
  } catch (...) {
    log::error("HTTP connection failed", {{"server", options.name}});
  }
  if (after == After::KeepAlive && !stopping) {
    --c.remaining;
    c.scanner.reset();
    c.continueSent = false;
    c.phase = Phase::Idle;
    c.deadline = Clock::now() + options.keepAliveTimeout;
    reader->add(std::move(client));
    return;
  }
  if (c.tls)
    c.tls->shutdown();
  if (after == After::DrainAndClose) {
    ::shutdown(c.fd.get(), SHUT_WR);
    c.phase = Phase::Draining;
    c.deadline = Clock::now() + kLingerTime;
    c.drained = 0;
    reader->add(std::move(client));
  }
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
  const size_t maxFraming =
      RequestLimits{kHeaderBudget, options.maxBodyBytes, kChunkLineLimit}.maxChunkFraming();
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
      options.keepAliveTimeout <= Duration::zero() || options.requestTimeout <= Duration::zero() ||
      options.handshakeTimeout <= Duration::zero()) {
    return fail("HTTP timeouts must be positive");
  }
  if (options.maxConnections == 0 || options.maxConnectionsPerPeer == 0)
    return fail("HTTP connection limits must be positive");
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
  Impl* self = impl_.get();
  auto reader = ConnectionReader::create(
      {.readTimeout = self->options.readTimeout,
       .requestTimeout = self->options.requestTimeout,
       .name = self->options.name},
      {.dispatch =
           [self](std::unique_ptr<Client>& client) { return self->workers->submit(client); },
       .overloaded = [self] { self->noteRejected(); },
       .timedOut =
           [self](const Client& client, std::string_view what) {
             ++self->timedOut;
             log::debug("HTTP connection closed: missed its deadline",
                        {{"server", self->options.name},
                         {"what", std::string(what)},
                         {"peer", client.addr}});
           }});
  if (!reader)
    return fail(reader.error().context("HTTP server " + impl_->options.name));
  if (auto r = impl_->bindListener(); !r)
    return r;
  impl_->started = true;
  impl_->workers = std::make_unique<RequestWorkers>(
      self->options.workers, self->options.maxQueued,
      [self](std::unique_ptr<Client> client) { self->serve(std::move(client)); });
  impl_->reader = std::move(*reader);
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
  // Wakes workers blocked on slow connections.
  impl_->registry.shutdownAll();
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
