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

#include "common/http_codec.h"
#include "common/log.h"
#include "common/openssl_util.h"
#include "common/strings.h"
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
// TLS 1.2 suites: forward secret AEAD only (TLS 1.3 keeps OpenSSL's defaults, all AEAD).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

std::string errnoText(int err) {
  return std::system_category().message(err);
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

// ---- One connection's byte stream, plain or TLS, buffered ------------------------------------

class Connection {
 public:
  Connection(int fd, SSL* ssl, Duration readTimeout, Duration writeTimeout)
      : fd_(fd), ssl_(ssl), readTimeout_(readTimeout), writeTimeout_(writeTimeout) {}

  enum class Read { Ok, Closed, TooLarge };

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
  bool hasBuffered() const { return begin_ < end_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0); }

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
    if (ssl_ != nullptr) {
      int chunk = static_cast<int>(std::min<size_t>(size, 64 * 1024));
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

struct HttpServer::Impl {
  explicit Impl(HttpServerOptions o);

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

  bool tls() const { return sslCtx != nullptr; }

  Result<void> initTls();
  Result<void> loadCertFiles(bool initial);
  std::shared_ptr<const TlsMaterial> currentMaterial();
  static int certCallback(SSL* ssl, void* arg);

  Result<void> bindListener();
  void serveLoop();
  void acceptConnections();
  void serveConnection(UniqueFd fd);
  SslPtr handshake(int fd, int* fdSlot);
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
      if (now - lastCertCheck >= options.certificateCheckInterval) {
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

void HttpServer::Impl::serveConnection(UniqueFd fd) {
  if (!registerConnection(fd.get()))
    return;
  int fdSlot = fd.get();  // read by the TLS BIO
  try {
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    SslPtr ssl;
    if (tls())
      ssl = handshake(fd.get(), &fdSlot);
    if (!tls() || ssl) {
      sockaddr_storage peer{};
      socklen_t peerLen = sizeof(peer);
      int remotePort = 0;
      std::string remoteAddr;
      if (::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&peer), &peerLen) == 0)
        remoteAddr = formatAddress(peer, &remotePort);
      Connection connection(fd.get(), ssl.get(), options.readTimeout, options.writeTimeout);
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
      if (ssl) {
        ERR_clear_error();
        SSL_shutdown(ssl.get());  // best effort close_notify
        ERR_clear_error();
      }
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
    if (auto r = impl->initTls(); !r)
      return fail(r.error());
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
