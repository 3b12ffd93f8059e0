#include "common/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <httplib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <system_error>
#include <thread>

#include "common/log.h"
#include "common/openssl_util.h"
#include "common/unique_fd.h"

namespace gvirtus {

namespace {

using Clock = std::chrono::steady_clock;

// Bytes of request line and headers one request may take.
constexpr std::size_t kHeaderBudget = 64 * 1024;
constexpr std::size_t kReadBufferSize = 16 * 1024;
// After answering a request whose body was left unread, the rest of the body is read and
// dropped for at most this long / this much, so the client sees the answer instead of a
// reset (a "lingering close").
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr std::size_t kLingerBytes = 16 * 1024 * 1024;
constexpr auto kCertCheckInterval = std::chrono::seconds(1);
// TLS 1.2 suites: forward secret AEAD only (TLS 1.3 keeps OpenSSL's defaults, all AEAD).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

std::string errnoText(int err) {
  return std::system_category().message(err);
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

int pollMillis(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 24 * 3600 * 1000));
}

// Waits for `events` on `fd` until `deadline`; true when the socket is ready (or in error,
// which the following read or write reports).
bool waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, pollMillis(deadline));
    if (n > 0)
      return true;
    if (n == 0)
      return false;
    if (errno != EINTR)
      return false;
  }
}

// OpenSSL's option macros are written with C casts.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
constexpr uint64_t kSslOptions =
    SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE;
#pragma GCC diagnostic pop

// A serving certificate (leaf, intermediates) and its key, parsed once.
struct TlsMaterial {
  X509Ptr cert;
  PkeyPtr key;
  X509StackPtr chain;
};

Result<std::shared_ptr<const TlsMaterial>> parseTlsMaterial(const std::string& certPem,
                                                            const std::string& keyPem) {
  ERR_clear_error();
  auto material = std::make_shared<TlsMaterial>();
  auto certBio = memoryBio(certPem);
  if (!certBio)
    return fail(certBio.error().context("allocate BIO"));
  std::vector<X509Ptr> certs = readPemCertificates(certBio->get(), &refusePassphrase);
  if (certs.empty())
    return fail("parse certificate: " + opensslErrors());
  ERR_clear_error();  // the read that ended the chain left "no start line"
  material->cert = std::move(certs.front());
  material->chain = newX509Stack();
  if (!material->chain)
    return fail("allocate certificate chain: " + opensslErrors());
  for (size_t i = 1; i < certs.size(); ++i) {
    if (!pushX509(material->chain.get(), std::move(certs[i])))
      return fail("build certificate chain: " + opensslErrors());
  }
  auto keyBio = memoryBio(keyPem);
  if (!keyBio)
    return fail(keyBio.error().context("allocate BIO"));
  material->key = readPemPrivateKey(keyBio->get(), &refusePassphrase);
  if (!material->key)
    return fail("parse private key: " + opensslErrors());
  if (X509_check_private_key(material->cert.get(), material->key.get()) != 1) {
    ERR_clear_error();
    return fail("the private key does not match the certificate");
  }
  return std::shared_ptr<const TlsMaterial>(std::move(material));
}

Result<std::string> readWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return fail("open " + path + ": " + errnoText(errno));
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad())
    return fail("read " + path);
  return out.str();
}

// What identifies one version of a file: a rewrite or a symlink swap (Kubernetes secret
// volumes) changes at least one of these.
struct FileStamp {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtimeSec = 0;
  int64_t mtimeNsec = 0;
  bool operator==(const FileStamp&) const = default;
};

FileStamp stampOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return {};
  return {true, st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
}

// ---- A socket BIO that never raises SIGPIPE ---------------------------------------------
// OpenSSL's own socket BIO writes with write(2), which kills a process that has not
// ignored SIGPIPE when the peer is gone; this one sends with MSG_NOSIGNAL.

int socketBioFd(BIO* bio) {
  return *static_cast<int*>(BIO_get_data(bio));
}

int socketBioWrite(BIO* bio, const char* data, size_t len, size_t* written) {
  BIO_clear_retry_flags(bio);
  ssize_t n = ::send(socketBioFd(bio), data, len, MSG_NOSIGNAL);
  if (n >= 0) {
    *written = static_cast<size_t>(n);
    return 1;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
    BIO_set_retry_write(bio);
  return 0;
}

int socketBioRead(BIO* bio, char* data, size_t len, size_t* readBytes) {
  BIO_clear_retry_flags(bio);
  ssize_t n = ::recv(socketBioFd(bio), data, len, 0);
  if (n > 0) {
    *readBytes = static_cast<size_t>(n);
    return 1;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_read(bio);
  }
  return 0;
}

long socketBioCtrl(BIO*, int cmd, long, void*) {
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;
    default:
      return 0;
  }
}

int socketBioCreate(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

// Process-lifetime and shared by every server; deliberately never freed, since OpenSSL's
// own exit-time cleanup may run before static destructors.
BIO_METHOD* socketBioMethod() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "gvirtus-socket");
    if (m != nullptr) {
      BIO_meth_set_write_ex(m, socketBioWrite);
      BIO_meth_set_read_ex(m, socketBioRead);
      BIO_meth_set_ctrl(m, socketBioCtrl);
      BIO_meth_set_create(m, socketBioCreate);
    }
    return m;
  }();
  return method;
}

int alpnSelect(SSL*, const unsigned char** out, unsigned char* outLen, const unsigned char* in,
               unsigned int inLen, void*) {
  // Only HTTP/1.1 is spoken; a client offering it (Go offers "h2,http/1.1") gets it.
  static const unsigned char kHttp11[] = {'h', 't', 't', 'p', '/', '1', '.', '1'};
  for (unsigned int i = 0; i < inLen;) {
    unsigned int len = in[i];
    if (i + 1 + len > inLen)
      break;
    if (len == sizeof(kHttp11) && std::memcmp(in + i + 1, kHttp11, len) == 0) {
      *out = in + i + 1;
      *outLen = static_cast<unsigned char>(len);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + len;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

std::string formatAddress(const sockaddr_storage& addr, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    sockaddr_in in{};
    std::memcpy(&in, &addr, sizeof(in));
    ::inet_ntop(AF_INET, &in.sin_addr, buf, sizeof(buf));
    *port = ntohs(in.sin_port);
    return buf;
  }
  if (addr.ss_family == AF_INET6) {
    sockaddr_in6 in6{};
    std::memcpy(&in6, &addr, sizeof(in6));
    *port = ntohs(in6.sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      in_addr v4{};
      std::memcpy(&v4, in6.sin6_addr.s6_addr + 12, sizeof(v4));
      ::inet_ntop(AF_INET, &v4, buf, sizeof(buf));
    } else {
      ::inet_ntop(AF_INET6, &in6.sin6_addr, buf, sizeof(buf));
    }
    return buf;
  }
  *port = 0;
  return {};
}

// ---- One connection's byte stream, plain or TLS, as httplib reads and writes it ----------

class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int fd, SSL* ssl, Duration readTimeout, Duration writeTimeout)
      : fd_(fd), ssl_(ssl), readTimeout_(readTimeout), writeTimeout_(writeTimeout) {}

  bool is_readable() const override {
    return hasBuffered() || waitFor(fd_, POLLIN, Clock::now() + readTimeout_);
  }
  bool is_writable() const override { return waitFor(fd_, POLLOUT, Clock::now() + writeTimeout_); }

  ssize_t read(char* ptr, size_t size) override {
    if (size == 0)
      return 0;
    if (consumed_ >= budget_)
      return -1;  // the request is larger than allowed
    size = std::min(size, budget_ - consumed_);
    if (pos_ == len_) {
      if (size >= buffer_.size()) {
        ssize_t n = rawRead(ptr, size);
        if (n > 0)
          consumed_ += static_cast<size_t>(n);
        return n;
      }
      ssize_t n = rawRead(buffer_.data(), buffer_.size());
      if (n <= 0)
        return n;
      pos_ = 0;
      len_ = static_cast<size_t>(n);
    }
    size_t n = std::min(size, len_ - pos_);
    std::memcpy(ptr, buffer_.data() + pos_, n);
    pos_ += n;
    consumed_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (size == 0)
      return 0;
    auto deadline = Clock::now() + writeTimeout_;
    if (ssl_ != nullptr) {
      int chunk = static_cast<int>(std::min<size_t>(size, 16 * 1024));
      for (;;) {
        ERR_clear_error();
        int n = SSL_write(ssl_, ptr, chunk);
        if (n > 0)
          return n;
        int err = SSL_get_error(ssl_, n);
        if (err == SSL_ERROR_WANT_WRITE) {
          if (!waitFor(fd_, POLLOUT, deadline))
            return -1;
        } else if (err == SSL_ERROR_WANT_READ) {
          if (!waitFor(fd_, POLLIN, deadline))
            return -1;
        } else {
          ERR_clear_error();
          return -1;
        }
      }
    }
    for (;;) {
      ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
      if (n >= 0)
        return n;
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        return -1;
      if (!waitFor(fd_, POLLOUT, deadline))
        return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ip.clear();
      port = 0;
      return;
    }
    ip = formatAddress(addr, &port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ip.clear();
      port = 0;
      return;
    }
    ip = formatAddress(addr, &port);
  }
  socket_t socket() const override { return fd_; }

  // Waits up to `timeout` for the first byte of a next request, giving up early when
  // `giveUp` says so (checked every 50 ms).
  bool waitForRequest(Duration timeout, const std::function<bool()>& giveUp) const {
    if (hasBuffered())
      return true;
    auto deadline = Clock::now() + timeout;
    for (;;) {
      auto slice = std::min(deadline, Clock::now() + std::chrono::milliseconds(50));
      if (waitFor(fd_, POLLIN, slice))
        return true;
      if (Clock::now() >= deadline || giveUp())
        return false;
    }
  }
  // Starts a new request: it may read `bytes` more (line, headers); the body adds its own.
  void startRequest(size_t bytes) {
    consumed_ = 0;
    budget_ = bytes;
  }
  void allowMore(size_t bytes) { budget_ += bytes; }

 private:
  bool hasBuffered() const { return pos_ < len_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0); }

  ssize_t rawRead(char* ptr, size_t size) {
    auto deadline = Clock::now() + readTimeout_;
    if (ssl_ != nullptr) {
      int want = static_cast<int>(std::min<size_t>(size, 1 << 30));
      for (;;) {
        ERR_clear_error();
        int n = SSL_read(ssl_, ptr, want);
        if (n > 0)
          return n;
        int err = SSL_get_error(ssl_, n);
        if (err == SSL_ERROR_WANT_READ) {
          if (!waitFor(fd_, POLLIN, deadline))
            return -1;
        } else if (err == SSL_ERROR_WANT_WRITE) {
          if (!waitFor(fd_, POLLOUT, deadline))
            return -1;
        } else {
          ERR_clear_error();
          return err == SSL_ERROR_ZERO_RETURN ? 0 : -1;
        }
      }
    }
    for (;;) {
      ssize_t n = ::recv(fd_, ptr, size, 0);
      if (n >= 0)
        return n;
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        return -1;
      if (!waitFor(fd_, POLLIN, deadline))
        return -1;
    }
  }

  int fd_;
  SSL* ssl_;
  Duration readTimeout_;
  Duration writeTimeout_;
  std::array<char, kReadBufferSize> buffer_{};
  size_t pos_ = 0;
  size_t len_ = 0;
  size_t consumed_ = 0;
  size_t budget_ = kHeaderBudget;
};

// What a request handler running on this thread may tell its connection.
struct ConnectionState {
  ConnectionStream* stream = nullptr;
  // The request body was not (fully) read: answer, then close instead of keeping alive.
  bool closeAfterResponse = false;
  // The request reached a handler; when httplib answered by itself (a malformed request,
  // an unknown method) the rest of the input cannot be trusted either.
  bool dispatched = false;
};
thread_local ConnectionState* tConnection = nullptr;

// Set while the task queue runs a connection it has no room for: the connection is closed
// at once instead of served.
thread_local bool tRejecting = false;

// A fixed pool of workers with a bounded wait queue. A connection beyond the queue is not
// left waiting: its task runs at once on the accepting thread with tRejecting set, which
// closes the socket. `waiting` counts the connections no idle worker is about to take, for
// idle keep-alive connections, which give their worker up while others wait.
class BoundedTaskQueue final : public httplib::TaskQueue {
 public:
  BoundedTaskQueue(size_t workers, size_t maxQueued, std::atomic<size_t>& waiting)
      : maxQueued_(maxQueued), waiting_(waiting) {
    workers = std::max<size_t>(workers, 1);
    threads_.reserve(workers);
    for (size_t i = 0; i < workers; ++i)
      threads_.emplace_back([this] { work(); });
  }
  ~BoundedTaskQueue() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    {
      std::unique_lock lock(mutex_);
      if (!shutdown_ && queue_.size() < idle_ + maxQueued_) {
        queue_.push_back(std::move(fn));
        publishWaiting();
        lock.unlock();
        cv_.notify_one();
        return;
      }
    }
    tRejecting = true;
    fn();
    tRejecting = false;
  }

  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      shutdown_ = true;
    }
    cv_.notify_all();
    threads_.clear();  // joins; queued connections are drained (and closed, as stopping)
  }

 private:
  // Connections queued beyond the idle workers about to take them (under mutex_).
  void publishWaiting() { waiting_ = queue_.size() > idle_ ? queue_.size() - idle_ : 0; }

  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mutex_);
        ++idle_;
        cv_.wait(lock, [this] { return shutdown_ || !queue_.empty(); });
        --idle_;
        if (queue_.empty())
          return;
        fn = std::move(queue_.front());
        queue_.pop_front();
        publishWaiting();
      }
      fn();
    }
  }

  const size_t maxQueued_;
  std::atomic<size_t>& waiting_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  size_t idle_ = 0;
  bool shutdown_ = false;
  std::vector<std::jthread> threads_;
};

// Opens a listening socket; `socketErrno` tells why socket(2) failed (0 when it did not).
Result<UniqueFd> bindSocket(const sockaddr* addr, socklen_t len, bool dualStack,
                            const std::string& shown, int* socketErrno = nullptr) {
  UniqueFd fd(::socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) {
    if (socketErrno != nullptr)
      *socketErrno = errno;
    return fail("listen on " + shown + ": socket: " + errnoText(errno));
  }
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (addr->sa_family == AF_INET6) {
    int v6only = dualStack ? 0 : 1;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
  }
  if (::bind(fd.get(), addr, len) != 0) {
    return fail("listen on " + shown + ": " + errnoText(errno));
  }
  if (::listen(fd.get(), 512) != 0) {
    return fail("listen on " + shown + ": " + errnoText(errno));
  }
  return fd;
}

std::string showAddress(const std::string& host, int port) {
  if (host.find(':') != std::string::npos)
    return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<UniqueFd> openListener(const std::string& host, int port) {
  if (host.empty()) {
    // Every interface: IPv6 with IPv4 mapped, or IPv4 alone where the kernel has no IPv6.
    std::string shown = ":" + std::to_string(port);
    sockaddr_in6 any6{};
    any6.sin6_family = AF_INET6;
    any6.sin6_addr = in6addr_any;
    any6.sin6_port = htons(static_cast<uint16_t>(port));
    int socketErrno = 0;
    auto fd = bindSocket(reinterpret_cast<const sockaddr*>(&any6), sizeof(any6), true, shown,
                         &socketErrno);
    if (fd || socketErrno == 0)
      return fd;
    sockaddr_in any4{};
    any4.sin_family = AF_INET;
    any4.sin_addr.s_addr = htonl(INADDR_ANY);
    any4.sin_port = htons(static_cast<uint16_t>(port));
    return bindSocket(reinterpret_cast<const sockaddr*>(&any4), sizeof(any4), false, shown);
  }
  std::string shown = showAddress(host, port);
  sockaddr_in in4{};
  if (::inet_pton(AF_INET, host.c_str(), &in4.sin_addr) == 1) {
    in4.sin_family = AF_INET;
    in4.sin_port = htons(static_cast<uint16_t>(port));
    return bindSocket(reinterpret_cast<const sockaddr*>(&in4), sizeof(in4), false, shown);
  }
  sockaddr_in6 in6{};
  if (::inet_pton(AF_INET6, host.c_str(), &in6.sin6_addr) == 1) {
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(static_cast<uint16_t>(port));
    return bindSocket(reinterpret_cast<const sockaddr*>(&in6), sizeof(in6), false, shown);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0)
    return fail("listen on " + shown + ": resolve: " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, &::freeaddrinfo);
  Error last;
  last.message = "listen on " + shown + ": no usable address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    auto fd = bindSocket(ai->ai_addr, ai->ai_addrlen, false, shown);
    if (fd)
      return fd;
    last = fd.error();
  }
  return fail(last);
}

int boundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return 0;
  int port = 0;
  formatAddress(addr, &port);
  return port;
}

HttpResponse internalError() {
  HttpResponse response;
  response.status = 500;
  response.body = "internal server error\n";
  return response;
}

std::string upper(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool isPseudoHeader(const std::string& name) {
  return equalsIgnoreCase(name, "REMOTE_ADDR") || equalsIgnoreCase(name, "REMOTE_PORT") ||
         equalsIgnoreCase(name, "LOCAL_ADDR") || equalsIgnoreCase(name, "LOCAL_PORT");
}

// The declared body length: nullopt without a (valid) Content-Length.
std::optional<uint64_t> contentLength(const httplib::Request& req) {
  if (!req.has_header("Content-Length"))
    return std::nullopt;
  std::string text = req.get_header_value("Content-Length");
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return value;
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

// ---- Address parsing -----------------------------------------------------------------------

Result<std::pair<std::string, int>> parseListenAddress(std::string_view address) {
  auto bad = [&](const std::string& why) {
    return fail("listen address \"" + std::string(address) + "\": " + why);
  };
  std::string host;
  std::string_view portText;
  if (!address.empty() && address.front() == '[') {
    auto close = address.find(']');
    if (close == std::string_view::npos)
      return bad("missing ']'");
    host = std::string(address.substr(1, close - 1));
    if (host.empty())
      return bad("empty IPv6 host");
    if (close + 1 >= address.size() || address[close + 1] != ':')
      return bad("missing :PORT");
    portText = address.substr(close + 2);
  } else {
    auto colon = address.rfind(':');
    if (colon == std::string_view::npos)
      return bad("want HOST:PORT or :PORT");
    host = std::string(address.substr(0, colon));
    if (host.find(':') != std::string::npos)
      return bad("write an IPv6 host in brackets");
    portText = address.substr(colon + 1);
  }
  int port = -1;
  auto [end, ec] = std::from_chars(portText.data(), portText.data() + portText.size(), port);
  if (portText.empty() || ec != std::errc() || end != portText.data() + portText.size() ||
      port < 0 || port > 65535) {
    return bad("port must be a number between 0 and 65535");
  }
  if (host == "*")
    host.clear();
  return std::make_pair(host, port);
}

// ---- The server ----------------------------------------------------------------------------

namespace {
class Transport;
}

struct HttpServer::Impl {
  // Defined after Transport: the unique_ptr below needs the complete type to be destroyed.
  explicit Impl(HttpServerOptions o);
  ~Impl();

  HttpServerOptions options;
  std::string host;
  int requestedPort = 0;

  std::shared_mutex routesMutex;
  std::map<std::string, std::map<std::string, HttpHandler>> routes;  // path -> method -> h

  SslCtxPtr sslCtx;
  std::mutex certMutex;
  std::shared_ptr<const TlsMaterial> material;
  Clock::time_point lastCertCheck{};
  std::mutex reloadMutex;
  FileStamp certStamp;
  FileStamp keyStamp;

  std::unique_ptr<Transport> transport;

  // Listener lifecycle, guarded by stateMutex.
  std::mutex stateMutex;
  std::condition_variable stateCv;
  bool started = false;
  std::atomic<bool> stopping{false};
  UniqueFd listenFd;
  std::jthread thread;
  std::atomic<int> port{0};

  std::mutex connMutex;
  std::set<int> connections;
  std::atomic<size_t> waitingConnections{0};
  std::atomic<size_t> rejected{0};
  std::atomic<int64_t> lastRejectLog{0};

  bool tls() const { return sslCtx != nullptr; }

  Result<void> initTls();
  Result<void> loadCertFiles(bool initial);
  std::shared_ptr<const TlsMaterial> currentMaterial();
  static int certCallback(SSL* ssl, void* arg);

  Result<void> bindListener();
  void serveLoop();
  void serveConnection(int fd);
  SslPtr handshake(int fd, int* fdSlot);
  void lingeringClose(int fd);
  void noteRejected();
  bool registerConnection(int fd);
  void unregisterConnection(int fd);

  void dispatch(const httplib::Request& req, httplib::Response& res,
                const httplib::ContentReader* reader);
  int expectContinue(const httplib::Request& req, httplib::Response& res);
};

namespace {

// httplib's server with connection handling replaced: the byte stream (plain or TLS),
// keep-alive, limits and shutdown are ours; request parsing, routing to the catch-all
// handlers and response writing stay httplib's.
class Transport final : public httplib::Server {
 public:
  explicit Transport(HttpServer::Impl& impl) : impl_(impl) {}

  void setListenSocket(int fd) { svr_sock_ = fd; }
  bool serveRequest(ConnectionStream& stream, bool lastRequest, bool& connectionClosed) {
    return process_request(stream, lastRequest, connectionClosed, nullptr);
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    if (tRejecting || impl_.stopping) {
      ::close(sock);
      impl_.noteRejected();
      return false;
    }
    impl_.serveConnection(sock);
    return true;
  }

  HttpServer::Impl& impl_;
};

}  // namespace

HttpServer::Impl::Impl(HttpServerOptions o) : options(std::move(o)) {}
HttpServer::Impl::~Impl() = default;

Result<void> HttpServer::Impl::initTls() {
  ERR_clear_error();
  sslCtx.reset(SSL_CTX_new(TLS_server_method()));
  if (!sslCtx)
    return fail("create TLS context: " + opensslErrors());
  SSL_CTX* ctx = sslCtx.get();
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
    return fail("set TLS minimum version: " + opensslErrors());
  }
  SSL_CTX_set_options(ctx, kSslOptions);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) {
    return fail("set TLS ciphers: " + opensslErrors());
  }
  SSL_CTX_set_cert_cb(ctx, &Impl::certCallback, this);
  SSL_CTX_set_alpn_select_cb(ctx, alpnSelect, nullptr);
  if (!options.certFile.empty() || !options.keyFile.empty()) {
    if (options.certFile.empty() || options.keyFile.empty()) {
      return fail("TLS needs both a certificate file and a key file");
    }
    if (auto r = loadCertFiles(true); !r)
      return r;
  } else if (options.certificate) {
    auto parsed = parseTlsMaterial(options.certificate->certPem, options.certificate->keyPem);
    if (!parsed)
      return fail(parsed.error().context("TLS certificate"));
    material = *parsed;
  }
  return {};
}

// Reads the certificate and key files when they changed since the last attempt. On the
// first load an error is returned; later a bad pair is logged and the old one kept.
Result<void> HttpServer::Impl::loadCertFiles(bool initial) {
  std::unique_lock reload(reloadMutex, std::try_to_lock);
  if (!reload.owns_lock())
    return {};  // another handshake is reloading right now
  FileStamp cert = stampOf(options.certFile);
  FileStamp key = stampOf(options.keyFile);
  if (!initial && cert == certStamp && key == keyStamp)
    return {};
  certStamp = cert;
  keyStamp = key;
  auto load = [&]() -> Result<std::shared_ptr<const TlsMaterial>> {
    auto certPem = readWholeFile(options.certFile);
    if (!certPem)
      return fail(certPem.error());
    auto keyPem = readWholeFile(options.keyFile);
    if (!keyPem)
      return fail(keyPem.error());
    return parseTlsMaterial(*certPem, *keyPem);
  };
  auto loaded = load();
  if (!loaded) {
    Error e = loaded.error().context("load TLS certificate " + options.certFile + " and key " +
                                     options.keyFile);
    if (initial)
      return fail(e);
    log::error("TLS certificate reload failed; serving the previous certificate",
               {{"server", options.name}, {"error", e.message}});
    return {};
  }
  {
    std::lock_guard lock(certMutex);
    material = *loaded;
  }
  if (!initial) {
    log::info("TLS certificate reloaded",
              {{"server", options.name}, {"certFile", options.certFile}});
  }
  return {};
}

std::shared_ptr<const TlsMaterial> HttpServer::Impl::currentMaterial() {
  if (!options.certFile.empty()) {
    bool due = false;
    {
      std::lock_guard lock(certMutex);
      auto now = Clock::now();
      if (now - lastCertCheck >= kCertCheckInterval) {
        lastCertCheck = now;
        due = true;
      }
    }
    if (due)
      (void)loadCertFiles(false);
  }
  std::lock_guard lock(certMutex);
  return material;
}

int HttpServer::Impl::certCallback(SSL* ssl, void* arg) {
  auto* self = static_cast<Impl*>(arg);
  auto current = self->currentMaterial();
  if (!current)
    return 0;  // no certificate yet: fail the handshake
  return SSL_use_cert_and_key(ssl, current->cert.get(), current->key.get(), current->chain.get(),
                              1) == 1
             ? 1
             : 0;
}

Result<void> HttpServer::Impl::bindListener() {
  auto fd = openListener(host, requestedPort);
  if (!fd)
    return fail(fd.error());
  // httplib closes the socket it accepts on when its loop ends; it gets a duplicate so
  // that the descriptor number in listenFd stays ours until we close it.
  int forHttplib = ::fcntl(fd->get(), F_DUPFD_CLOEXEC, 0);
  if (forHttplib < 0)
    return fail("listen: dup: " + errnoText(errno));
  port = boundPort(fd->get());
  listenFd = std::move(*fd);
  transport->setListenSocket(forHttplib);
  return {};
}

void HttpServer::Impl::serveLoop() {
  for (;;) {
    transport->listen_after_bind();
    std::unique_lock lock(stateMutex);
    transport->setListenSocket(INVALID_SOCKET);  // httplib closed its descriptor
    listenFd.reset();
    if (stopping)
      return;
    log::error("HTTP listener failed; opening it again",
               {{"server", options.name}, {"port", port.load()}});
    for (;;) {
      stateCv.wait_for(lock, std::chrono::seconds(1), [this] { return stopping.load(); });
      if (stopping)
        return;
      requestedPort = port;
      auto bound = bindListener();
      if (bound)
        break;
      log::error("HTTP listener could not be opened again",
                 {{"server", options.name}, {"error", bound.error().message}});
    }
  }
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

SslPtr HttpServer::Impl::handshake(int fd, int* fdSlot) {
  ERR_clear_error();
  SslPtr ssl(SSL_new(sslCtx.get()));
  BIO* bio = ssl ? BIO_new(socketBioMethod()) : nullptr;
  if (!ssl || bio == nullptr) {
    log::error("TLS: cannot set up a connection",
               {{"server", options.name}, {"error", opensslErrors()}});
    return nullptr;
  }
  BIO_set_data(bio, fdSlot);
  SSL_set_bio(ssl.get(), bio, bio);  // the SSL owns the BIO now
  SSL_set_accept_state(ssl.get());
  auto deadline = Clock::now() + options.readTimeout;
  for (;;) {
    ERR_clear_error();
    int rc = SSL_do_handshake(ssl.get());
    if (rc == 1)
      return ssl;
    int err = SSL_get_error(ssl.get(), rc);
    bool ready = false;
    if (err == SSL_ERROR_WANT_READ) {
      ready = waitFor(fd, POLLIN, deadline);
    } else if (err == SSL_ERROR_WANT_WRITE) {
      ready = waitFor(fd, POLLOUT, deadline);
    }
    if (!ready) {
      if (log::enabled(log::Level::Debug)) {
        std::string why = err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE
                              ? std::string("timed out")
                              : opensslErrors();
        log::debug("TLS handshake failed", {{"server", options.name}, {"error", why}});
      }
      ERR_clear_error();
      return nullptr;
    }
  }
}

void HttpServer::Impl::lingeringClose(int fd) {
  ::shutdown(fd, SHUT_WR);
  auto deadline = Clock::now() + kLingerTime;
  size_t drained = 0;
  std::array<char, 16 * 1024> sink{};
  while (drained < kLingerBytes && !stopping && waitFor(fd, POLLIN, deadline)) {
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

void HttpServer::Impl::serveConnection(int rawFd) {
  UniqueFd fd(rawFd);
  if (!registerConnection(fd.get()))
    return;
  int fdSlot = fd.get();  // read by the TLS BIO
  try {
    ::fcntl(fd.get(), F_SETFD, FD_CLOEXEC);
    ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    SslPtr ssl;
    if (tls())
      ssl = handshake(fd.get(), &fdSlot);
    if (!tls() || ssl) {
      ConnectionStream stream(fd.get(), ssl.get(), options.readTimeout, options.writeTimeout);
      ConnectionState state{&stream};
      tConnection = &state;
      size_t remaining = std::max<size_t>(options.keepAliveMaxRequests, 1);
      bool first = true;
      // The first request may take the read timeout to arrive; between requests an idle
      // connection waits for the keep-alive timeout, or less when connections are queued
      // for a worker (the client reconnects when it needs to).
      auto giveUp = [&] { return stopping || (!first && waitingConnections > 0); };
      while (
          remaining > 0 && !stopping &&
          stream.waitForRequest(first ? options.readTimeout : options.keepAliveTimeout, giveUp)) {
        first = false;
        stream.startRequest(kHeaderBudget);
        state.dispatched = false;
        bool closed = false;
        if (!transport->serveRequest(stream, remaining == 1, closed))
          break;
        if (!state.dispatched)
          state.closeAfterResponse = true;
        if (closed || state.closeAfterResponse)
          break;
        --remaining;
      }
      tConnection = nullptr;
      if (ssl) {
        ERR_clear_error();
        SSL_shutdown(ssl.get());  // best effort close_notify
        ERR_clear_error();
      }
      if (state.closeAfterResponse)
        lingeringClose(fd.get());
    }
  } catch (const std::exception& e) {
    tConnection = nullptr;
    log::error("HTTP connection failed", {{"server", options.name}, {"error", e.what()}});
  } catch (...) {
    tConnection = nullptr;
    log::error("HTTP connection failed", {{"server", options.name}});
  }
  unregisterConnection(fd.get());
}

int HttpServer::Impl::expectContinue(const httplib::Request& req, httplib::Response& res) {
  auto length = contentLength(req);
  if (length && *length > options.maxBodyBytes) {
    if (tConnection != nullptr)
      tConnection->closeAfterResponse = true;
    res.status = 413;
    res.set_header("Connection", "close");
    res.set_content("request body too large\n", "text/plain; charset=utf-8");
    return 413;
  }
  return 100;
}

void HttpServer::Impl::dispatch(const httplib::Request& req, httplib::Response& res,
                                const httplib::ContentReader* reader) {
  auto answer = [&](int status, std::string body) {
    res.status = status;
    res.set_content(std::move(body), "text/plain; charset=utf-8");
  };
  // A body left unread must not be taken for the next request.
  auto closeAfter = [&] {
    if (tConnection != nullptr)
      tConnection->closeAfterResponse = true;
    res.set_header("Connection", "close");
  };

  if (tConnection != nullptr)
    tConnection->dispatched = true;
  HttpHandler handler;
  std::string allowed;
  {
    std::shared_lock lock(routesMutex);
    auto path = routes.find(req.path);
    if (path != routes.end()) {
      const auto& methods = path->second;
      auto m = methods.find(req.method);
      if (m == methods.end() && req.method == "HEAD")
        m = methods.find("GET");
      if (m != methods.end())
        handler = m->second;
      for (const auto& [name, h] : methods) {
        if (!allowed.empty())
          allowed += ", ";
        allowed += name;
        if (name == "GET" && !methods.contains("HEAD"))
          allowed += ", HEAD";
      }
    }
  }
  if (!handler) {
    if (reader != nullptr)
      closeAfter();
    if (allowed.empty())
      return answer(404, "not found\n");
    res.set_header("Allow", allowed);
    if (req.method == "OPTIONS") {
      res.status = 204;
      return;
    }
    return answer(405, "method not allowed\n");
  }

  HttpRequest request;
  request.method = req.method;
  request.path = req.path;
  request.remoteAddr = req.remote_addr;
  request.remotePort = req.remote_port;
  for (const auto& [k, v] : req.headers) {
    if (!isPseudoHeader(k))
      request.headers.emplace_back(k, v);
  }
  for (const auto& [k, v] : req.params)
    request.query.emplace_back(k, v);

  if (reader != nullptr) {
    auto length = contentLength(req);
    if (length && *length > options.maxBodyBytes) {
      closeAfter();
      return answer(413, "request body too large\n");
    }
    // Room for the body, with chunked framing, on top of the headers' budget.
    if (tConnection != nullptr) {
      tConnection->stream->allowMore(8 * options.maxBodyBytes + 64 * 1024);
    }
    bool tooLarge = false;
    std::string body;
    bool complete = (*reader)([&](const char* data, size_t len) {
      if (body.size() + len > options.maxBodyBytes) {
        tooLarge = true;
        return false;
      }
      body.append(data, len);
      return true;
    });
    if (!complete) {
      closeAfter();
      if (tooLarge)
        return answer(413, "request body too large\n");
      return answer(400, "could not read the request body\n");
    }
    request.body = std::move(body);
  }

  HttpResponse response;
  try {
    response = handler(request);
  } catch (const std::exception& e) {
    log::error("HTTP handler failed", {{"server", options.name},
                                       {"method", req.method},
                                       {"path", req.path},
                                       {"error", e.what()}});
    response = internalError();
  } catch (...) {
    log::error("HTTP handler failed",
               {{"server", options.name}, {"method", req.method}, {"path", req.path}});
    response = internalError();
  }
  res.status = response.status;
  std::string contentType = response.contentType;
  for (const auto& [k, v] : response.headers) {
    if (equalsIgnoreCase(k, "Content-Type")) {
      contentType = v;
    } else if (!equalsIgnoreCase(k, "Content-Length") &&
               !equalsIgnoreCase(k, "Transfer-Encoding")) {
      res.set_header(k, v);  // httplib drops values holding CR or LF
    }
  }
  res.set_content(std::move(response.body), contentType);
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
    if (auto r = impl->initTls(); !r)
      return fail(r.error());
  }

  impl->transport = std::make_unique<Transport>(*impl);
  Impl* self = impl.get();
  Transport& t = *impl->transport;
  t.set_payload_max_length(self->options.maxBodyBytes);
  t.set_keep_alive_max_count(std::max<size_t>(self->options.keepAliveMaxRequests, 1));
  // Only advertised in the Keep-Alive header; the connection loop applies the timeout.
  t.set_keep_alive_timeout(std::max<time_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(self->options.keepAliveTimeout).count()));
  t.set_read_timeout(self->options.readTimeout);
  t.set_write_timeout(self->options.writeTimeout);
  // httplib takes ownership of the queue through a raw pointer: this is the one place.
  t.new_task_queue = [self]() -> httplib::TaskQueue* {
    return std::make_unique<BoundedTaskQueue>(self->options.workers, self->options.maxQueued,
                                              self->waitingConnections)
        .release();
  };
  auto plain = [self](const httplib::Request& req, httplib::Response& res) {
    self->dispatch(req, res, nullptr);
  };
  auto withBody = [self](const httplib::Request& req, httplib::Response& res,
                         const httplib::ContentReader& reader) {
    self->dispatch(req, res, &reader);
  };
  const std::string any = ".*";
  t.Get(any, plain);
  t.Options(any, plain);
  t.Post(any, withBody);
  t.Put(any, withBody);
  t.Patch(any, withBody);
  t.Delete(any, withBody);
  t.set_expect_100_continue_handler([self](const httplib::Request& req, httplib::Response& res) {
    return self->expectContinue(req, res);
  });
  t.set_exception_handler(
      [self](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
        log::error("HTTP request failed", {{"server", self->options.name}, {"path", req.path}});
        res.status = 500;
        res.set_content("internal server error\n", "text/plain; charset=utf-8");
      });
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
  impl_->thread = std::jthread([self] { self->serveLoop(); });
  log::info("HTTP server listening", {{"server", impl_->options.name},
                                      {"address", impl_->options.address},
                                      {"port", impl_->port.load()},
                                      {"tls", impl_->tls()}});
  return {};
}

int HttpServer::port() const {
  return impl_->port;
}

void HttpServer::stop() {
  {
    std::lock_guard lock(impl_->stateMutex);
    impl_->stopping = true;
    // Wakes the accept loop (accept fails, httplib leaves its loop and drains workers).
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
  return impl_->tls();
}

Result<void> HttpServer::setCertificate(const PemKeyPair& pair) {
  if (!impl_->tls())
    return fail("HTTP server " + impl_->options.name + " does not serve TLS");
  auto parsed = parseTlsMaterial(pair.certPem, pair.keyPem);
  if (!parsed)
    return fail(parsed.error().context("TLS certificate"));
  std::lock_guard lock(impl_->certMutex);
  impl_->material = *parsed;
  return {};
}

std::optional<std::chrono::system_clock::time_point> HttpServer::certificateNotAfter() const {
  std::shared_ptr<const TlsMaterial> material;
  {
    std::lock_guard lock(impl_->certMutex);
    material = impl_->material;
  }
  if (!material || !material->cert)
    return std::nullopt;
  auto end = certificateEnd(material->cert.get());
  return end ? std::optional(*end) : std::nullopt;
}

size_t HttpServer::rejectedConnections() const {
  return impl_->rejected;
}

}  // namespace gvirtus
