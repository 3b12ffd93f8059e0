#include "common/kube_client.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "common/backoff.h"
#include "common/json_reader.h"
#include "common/log.h"
#include "common/openssl_util.h"
#include "common/rate_limiter.h"
#include "common/stoppable_sleep.h"
#include "common/strings.h"
#include "common/watch_stream.h"

namespace gvirtus {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Retries of 429 and 5xx without Retry-After, and of connection failures.
constexpr Duration kRetryInitial = std::chrono::milliseconds(250);
constexpr Duration kRetryMax = std::chrono::seconds(10);
// A Retry-After larger than this is clipped: a request does not sleep for an hour.
constexpr Duration kMaxRetryAfter = std::chrono::seconds(60);
// The token file is looked at no more often than this.
// Idle keep-alive connections kept for reuse (each for at most KubeClientOptions::maxIdle).
constexpr size_t kMaxIdleConnections = 8;
// How much of a non-Status error body goes into a message.
constexpr size_t kMaxBodyInMessage = 200;
// The read timeout of a watch is this much above its timeoutSeconds.
constexpr int kWatchReadSlackSeconds = 30;

// OpenSSL's control macros expand to old-style casts; keep them in one place.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
long setMinTls12(SSL_CTX* ctx) {
  return SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}
long addChainCertificate(SSL_CTX* ctx, X509* cert) {
  return SSL_CTX_add1_chain_cert(ctx, cert);
}
#pragma GCC diagnostic pop

Result<std::vector<X509Ptr>> readCertificates(const std::string& pem, const std::string& what) {
  std::vector<X509Ptr> certs;
  if (auto bio = memoryBio(pem)) {
    certs = readPemCertificates(bio->get());
  }
  ERR_clear_error();
  if (certs.empty()) {
    return fail(what + ": no PEM certificate found");
  }
  return certs;
}

Result<PkeyPtr> readKey(const std::string& pem) {
  auto bio = memoryBio(pem);
  if (!bio) {
    return fail(bio.error().context("client key"));
  }
  PkeyPtr key = readPemPrivateKey(bio->get());
  if (!key) {
    return fail("client key: " + opensslReason());
  }
  return key;
}

bool isIpLiteral(const std::string& host) {
  unsigned char buffer[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

// The first address of `host`, numeric, for httplib's host-to-address map.
Result<std::string> resolveFirst(const std::string& host) {
  if (isIpLiteral(host)) {
    return host;
  }
  struct addrinfo hints {};
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return fail("cannot resolve " + host + ": " + gai_strerror(rc));
  }
  std::unique_ptr<struct addrinfo, decltype(&freeaddrinfo)> guard(found, &freeaddrinfo);
  char text[NI_MAXHOST];
  if (getnameinfo(found->ai_addr, found->ai_addrlen, text, sizeof text, nullptr, 0,
                  NI_NUMERICHOST) != 0) {
    return fail("cannot resolve " + host);
  }
  return std::string(text);
}

struct ServerUrl {
  bool tls = true;
  std::string host;  // without IPv6 brackets
  int port = 443;
  std::string basePath;  // "" or "/prefix" (no trailing slash)
};

Result<ServerUrl> parseServerUrl(const std::string& server) {
  ServerUrl url;
  std::string rest;
  if (server.starts_with("https://")) {
    rest = server.substr(8);
  } else if (server.starts_with("http://")) {
    url.tls = false;
    url.port = 80;
    rest = server.substr(7);
  } else {
    return fail("server \"" + server + "\" is not an http(s) URL");
  }
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) {
    url.basePath = rest.substr(slash);
    while (!url.basePath.empty() && url.basePath.back() == '/') {
      url.basePath.pop_back();
    }
  }
  std::string portText;
  if (authority.starts_with("[")) {
    const size_t close = authority.find(']');
    if (close == std::string::npos) {
      return fail("server \"" + server + "\": unterminated IPv6 address");
    }
    url.host = authority.substr(1, close - 1);
    std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') {
        return fail("server \"" + server + "\": bad host");
      }
      portText = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    url.host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      portText = authority.substr(colon + 1);
    }
  }
  if (url.host.empty()) {
    return fail("server \"" + server + "\": no host");
  }
  if (!portText.empty()) {
    if (portText.size() > 5 || portText.find_first_not_of("0123456789") != std::string::npos) {
      return fail("server \"" + server + "\": bad port");
    }
    url.port = std::stoi(portText);
    if (url.port < 1 || url.port > 65535) {
      return fail("server \"" + server + "\": bad port");
    }
  }
  return url;
}

std::string encodeQueryValue(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0x0f];
    }
  }
  return out;
}

using QueryParams = std::vector<std::pair<std::string, std::string>>;

std::string queryString(const QueryParams& params) {
  std::string out;
  for (const auto& [key, value] : params) {
    out += out.empty() ? "?" : "&";
    out += key + "=" + encodeQueryValue(value);
  }
  return out;
}

// The Kubernetes StatusReason that usually goes with an HTTP status.
std::string reasonForStatus(int status) {
  switch (status) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 406:
      return "NotAcceptable";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "RequestEntityTooLarge";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "";
  }
}

std::string oneLine(std::string_view text, size_t max) {
  std::string out;
  for (char c : text.substr(0, max)) {
    out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  }
  if (text.size() > max) {
    out += "...";
  }
  return out;
}

// "GET /api/v1/nodes/x: 404 NotFound: nodes \"x\" not found", from an API Status body when
// there is one.
Error statusError(const std::string& what, int httpStatus, const std::string& body) {
  Error error;
  error.httpStatus = httpStatus;
  std::string message;
  // Not JSON: the body itself (a proxy's HTML page, a plain text error) is the message.
  if (auto status = readJson(body); status && status->is_object()) {
    if (auto it = status->find("reason"); it != status->end() && it->is_string()) {
      error.reason = it->get<std::string>();
    }
    if (auto it = status->find("message"); it != status->end() && it->is_string()) {
      message = it->get<std::string>();
    }
  }
  if (message.empty() && error.reason.empty()) {
    message = body.empty() ? "no response body" : oneLine(body, kMaxBodyInMessage);
  }
  std::string head = what + ": " + std::to_string(httpStatus);
  const std::string reason = error.reason.empty() ? reasonForStatus(httpStatus) : error.reason;
  if (!reason.empty()) {
    head += " " + reason;
  }
  error.message = message.empty() ? head : head + ": " + message;
  return error;
}

std::optional<Duration> retryAfterOf(const httplib::Response& response) {
  if (!response.has_header("Retry-After")) {
    return std::nullopt;
  }
  const std::string value = response.get_header_value("Retry-After");
  if (value.empty() || value.size() > 9 ||
      value.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;  // an HTTP date: fall back to the backoff
  }
  return std::min<Duration>(std::chrono::seconds(std::stol(value)), kMaxRetryAfter);
}

bool isIdempotent(const std::string& method) {
  return method == "GET" || method == "PUT" || method == "DELETE" || method == "HEAD";
}

int randomWatchTimeout() {
  thread_local std::mt19937 engine{std::random_device{}()};
  return std::uniform_int_distribution<int>(300, 600)(engine);
}

// The bearer token: static, or read from a file that is re-read when it changes
// (projected service account tokens rotate).
class TokenSource {
 public:
  TokenSource(std::string token, std::string file, Duration checkInterval)
      : static_(std::move(token)), file_(std::move(file)), checkInterval_(checkInterval) {}

  std::string current() {
    if (file_.empty()) {
      return static_;
    }
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (loaded_ && now - checked_ < checkInterval_) {
      return cached_;
    }
    checked_ = now;
    std::error_code ec;
    const auto mtime = fs::last_write_time(file_, ec);
    const auto size = ec ? 0 : fs::file_size(file_, ec);
    if (ec) {
      if (!warned_) {
        log::warn("cannot stat the token file", {{"file", file_}, {"error", ec.message()}});
        warned_ = true;
      }
      return loaded_ ? cached_ : static_;
    }
    if (loaded_ && mtime == mtime_ && size == size_) {
      return cached_;
    }
    std::ifstream in(file_, std::ios::binary);
    std::stringstream contents;
    contents << in.rdbuf();
    const std::string token(trim(contents.str()));
    if (!in.good() && !in.eof()) {
      return loaded_ ? cached_ : static_;
    }
    if (token.empty()) {
      // Mid-rotation or broken: keep the last good token.
      return loaded_ ? cached_ : static_;
    }
    if (loaded_ && token != cached_) {
      log::debug("bearer token file changed", {{"file", file_}});
    }
    cached_ = std::move(token);
    mtime_ = mtime;
    size_ = size;
    loaded_ = true;
    warned_ = false;
    return cached_;
  }

 private:
  const std::string static_;
  const std::string file_;
  const Duration checkInterval_;
  std::mutex mutex_;
  bool loaded_ = false;
  bool warned_ = false;
  std::string cached_;
  fs::file_time_type mtime_;
  uintmax_t size_ = 0;
  std::chrono::steady_clock::time_point checked_;
};

// One HTTP(S) client with its keep-alive connection. Used by one thread at a time: httplib's
// client is not safe for concurrent requests.
struct Connection {
  std::unique_ptr<httplib::ClientImpl> http;
  // Why the server certificate was refused, filled in by the verify callback.
  std::string verifyError;
  std::chrono::steady_clock::time_point idleSince;
};

// Cuts the request in flight on `http` when either token is requested. The socket a
// request makes is shut down directly: httplib's stop() would wait for a connect or TLS
// handshake in progress (it holds a lock through both), up to the connection timeout,
// while an API server that black-holes connections keeps the handshake hanging. A stop
// before the request has a socket is caught by the socket-options hook, which runs on the
// requesting thread while the socket is made and shrinks its timeouts; a kept-alive
// socket (no hook) is cut by stop(), which then does not wait.
class RequestCancellation {
 public:
  RequestCancellation(httplib::ClientImpl& http, std::stop_token first, std::stop_token second)
      : http_(http) {
    http_.set_socket_options([this](socket_t socket) {
      socket_.store(socket);
      if (cut_.load()) {
        http_.set_connection_timeout(0, 1000);
        http_.set_read_timeout(0, 1000);
      }
    });
    onFirst_.emplace(std::move(first), Cut{this});
    onSecond_.emplace(std::move(second), Cut{this});
  }
  ~RequestCancellation() {
    onFirst_.reset();
    onSecond_.reset();
    http_.set_socket_options(nullptr);
  }
  RequestCancellation(const RequestCancellation&) = delete;
  RequestCancellation& operator=(const RequestCancellation&) = delete;

  bool cut() const { return cut_.load(); }

 private:
  struct Cut {
    RequestCancellation* self;
    void operator()() const {
      self->cut_.store(true);
      if (const int socket = self->socket_.load(); socket >= 0) {
        ::shutdown(socket, SHUT_RDWR);  // not close: the descriptor stays httplib's
      } else {
        self->http_.stop();
      }
    }
  };
  httplib::ClientImpl& http_;
  std::atomic<bool> cut_{false};
  std::atomic<int> socket_{-1};
  std::optional<std::stop_callback<Cut>> onFirst_;
  std::optional<std::stop_callback<Cut>> onSecond_;
};

constexpr int kConnectionExIndex = 0;  // SSL_CTX "app data"

int verifyCallback(int ok, X509_STORE_CTX* store) {
  if (ok == 1) {
    return ok;
  }
  auto* ssl =
      static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  if (ssl != nullptr) {
    auto* connection =
        static_cast<Connection*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), kConnectionExIndex));
    if (connection != nullptr && connection->verifyError.empty()) {
      connection->verifyError = X509_verify_cert_error_string(X509_STORE_CTX_get_error(store));
    }
  }
  return ok;
}

struct Call {
  std::string verb;  // for RequestCounts
  std::string method;
  std::string path;
  QueryParams query;
  std::string body;
  std::string contentType;

  std::string what() const { return method + " " + path; }
};

std::string transportError(httplib::Error error, const Connection& connection,
                           const std::string& server) {
  std::string text;
  switch (error) {
    case httplib::Error::Connection:
      text = "cannot connect to " + server;
      break;
    case httplib::Error::ConnectionTimeout:
      text = "timed out connecting to " + server;
      break;
    case httplib::Error::Read:
      text = "connection lost or timed out while reading the response";
      break;
    case httplib::Error::Write:
      text = "connection lost while sending the request";
      break;
    case httplib::Error::SSLConnection:
      text = "TLS handshake with " + server + " failed";
      break;
    case httplib::Error::SSLServerVerification:
      text = "server certificate of " + server + " refused";
      break;
    default:
      text = "request failed (" + httplib::to_string(error) + ")";
      break;
  }
  if (!connection.verifyError.empty()) {
    text = "server certificate of " + server + " refused: " + connection.verifyError;
  }
  return text;
}

}  // namespace

class KubeClient::Impl {
 public:
  Impl(KubeConfig config, KubeClientOptions options, ServerUrl url)
      : config_(std::move(config)),
        options_(std::move(options)),
        url_(std::move(url)),
        limiter_(options_.qps, options_.burst),
        tokens_(config_.token, config_.tokenFile, options_.tokenCheckInterval) {}

  Result<void> loadCredentials() {
    if (!url_.tls) {
      return {};
    }
    if (!config_.clientCertPem.empty() || !config_.clientKeyPem.empty()) {
      if (config_.clientCertPem.empty() || config_.clientKeyPem.empty()) {
        return fail("a client certificate needs both certificate and key");
      }
      auto certs = readCertificates(config_.clientCertPem, "client certificate");
      if (!certs) {
        return fail(certs.error());
      }
      auto key = readKey(config_.clientKeyPem);
      if (!key) {
        return fail(key.error());
      }
      if (X509_check_private_key(certs->front().get(), key->get()) != 1) {
        ERR_clear_error();
        return fail("client certificate and client key do not match");
      }
      clientCert_ = std::move(certs->front());
      for (size_t i = 1; i < certs->size(); ++i) {
        clientChain_.push_back(std::move((*certs)[i]));
      }
      clientKey_ = std::move(*key);
    }
    if (!config_.caPem.empty() && !config_.insecureSkipTlsVerify) {
      auto cas = readCertificates(config_.caPem, "certificate authority");
      if (!cas) {
        return fail(cas.error());
      }
      caCerts_ = std::move(*cas);
    }
    return {};
  }

  const std::string& server() const { return config_.server; }

  RequestCounts counts() const {
    std::lock_guard lock(countsMutex_);
    return counts_;
  }

  void count(const std::string& verb) {
    std::lock_guard lock(countsMutex_);
    ++counts_.byVerb[verb];
  }

  Result<httplib::Response> send(const Call& call);
  Result<json> sendJson(const Call& call);
  // Waits `duration` unless the client is cancelled first; false when cancelled.
  bool waitUnlessCancelled(Duration duration);
  // A rate-limiter token, waiting for it unless cancelled; false when cancelled.
  bool takeToken();
  Result<void> watch(const std::string& path, const WatchOptions& options,
                     const std::function<bool(const WatchEvent&)>& onEvent, std::stop_token stop);

 private:
  Result<std::unique_ptr<Connection>> newConnection(Duration readTimeout);
  std::unique_ptr<Connection> takeIdle();
  void giveBack(std::unique_ptr<Connection> connection);
  void dropIdle();
  httplib::Headers headers();
  // Logs each distinct Warning header of the API server once (deprecated APIs, ignored
  // fields): what an operator must see before the next release removes something.
  void reportWarnings(const Call& call, const httplib::Response& response);

  const KubeConfig config_;
  const KubeClientOptions options_;
  const ServerUrl url_;
  X509Ptr clientCert_;
  std::vector<X509Ptr> clientChain_;
  PkeyPtr clientKey_;
  std::vector<X509Ptr> caCerts_;
  RateLimiter limiter_;
  TokenSource tokens_;

  std::mutex idleMutex_;
  std::vector<std::unique_ptr<Connection>> idle_;

  mutable std::mutex countsMutex_;
  RequestCounts counts_;

  std::mutex warningsMutex_;
  std::set<std::string> warnings_;
};

void KubeClient::Impl::reportWarnings(const Call& call, const httplib::Response& response) {
  // At most a handful of distinct texts exist; a server that sent endless new ones would
  // only grow this set to the cap.
  constexpr size_t kMaxDistinctWarnings = 64;
  const size_t count = response.get_header_value_count("Warning");
  for (size_t i = 0; i < count; ++i) {
    std::string text = response.get_header_value("Warning", i);
    {
      std::lock_guard lock(warningsMutex_);
      if (warnings_.size() >= kMaxDistinctWarnings || !warnings_.insert(text).second) {
        continue;
      }
    }
    log::warn("the API server warns", {{"request", call.what()}, {"warning", text}});
  }
}

Result<std::unique_ptr<Connection>> KubeClient::Impl::newConnection(Duration readTimeout) {
  auto connection = std::make_unique<Connection>();
  if (!url_.tls) {
    connection->http = std::make_unique<httplib::ClientImpl>(url_.host, url_.port);
  } else {
    // With tls-server-name, that name is the one httplib sends as SNI and the one verified;
    // the connection still goes to the server URL's address.
    const std::string name = config_.tlsServerName.empty() ? url_.host : config_.tlsServerName;
    std::unique_ptr<httplib::SSLClient> client;
    if (clientKey_) {
      client = std::make_unique<httplib::SSLClient>(name, url_.port, clientCert_.get(),
                                                    clientKey_.get());
    } else {
      client = std::make_unique<httplib::SSLClient>(name, url_.port);
    }
    if (!client->is_valid()) {
      return fail("TLS client setup failed: " + opensslReason());
    }
    if (name != url_.host) {
      auto address = resolveFirst(url_.host);
      if (!address) {
        return fail(address.error());
      }
      client->set_hostname_addr_map({{name, *address}});
    }
    SSL_CTX* ctx = client->ssl_context();
    if (setMinTls12(ctx) != 1) {
      return fail("TLS 1.2 minimum: " + opensslReason());
    }
    for (const auto& cert : clientChain_) {
      if (addChainCertificate(ctx, cert.get()) != 1) {
        return fail("client certificate chain: " + opensslReason());
      }
    }
    // httplib's own verification would add the system roots to the cluster CA; verify here
    // instead, with only the kubeconfig's CA (or the system roots when it has none).
    client->enable_server_certificate_verification(false);
    if (!config_.insecureSkipTlsVerify) {
      StorePtr store(X509_STORE_new());
      if (!store) {
        return fail("X509_STORE_new: " + opensslReason());
      }
      for (const auto& ca : caCerts_) {
        if (X509_STORE_add_cert(store.get(), ca.get()) != 1) {
          return fail("certificate authority: " + opensslReason());
        }
      }
      if (caCerts_.empty() && X509_STORE_set_default_paths(store.get()) != 1) {
        return fail("system trust store: " + opensslReason());
      }
      SSL_CTX_set_cert_store(ctx, store.release());  // the context owns it now
      X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      const int set = isIpLiteral(name) ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                                        : X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
      if (set != 1) {
        return fail("server name \"" + name + "\": " + opensslReason());
      }
      SSL_CTX_set_ex_data(ctx, kConnectionExIndex, connection.get());
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, &verifyCallback);
    }
    connection->http = std::move(client);
  }
  httplib::ClientImpl& http = *connection->http;
  http.set_url_encode(false);  // paths and queries are encoded here
  http.set_keep_alive(true);
  // Requests are small writes answered at once: Nagle plus delayed ACK would add ~40 ms.
  http.set_tcp_nodelay(true);
  http.set_follow_location(false);
  http.set_connection_timeout(
      std::min<Duration>(options_.requestTimeout, std::chrono::seconds(30)));
  http.set_read_timeout(readTimeout);
  http.set_write_timeout(options_.requestTimeout);
  return connection;
}

std::unique_ptr<Connection> KubeClient::Impl::takeIdle() {
  std::lock_guard lock(idleMutex_);
  const auto now = options_.clock->now();
  while (!idle_.empty()) {
    auto connection = std::move(idle_.back());
    idle_.pop_back();
    if (now - connection->idleSince < options_.maxIdle) {
      return connection;
    }
  }
  return nullptr;
}

void KubeClient::Impl::giveBack(std::unique_ptr<Connection> connection) {
  connection->idleSince = options_.clock->now();
  std::lock_guard lock(idleMutex_);
  if (idle_.size() < kMaxIdleConnections) {
    idle_.push_back(std::move(connection));
  }
}

void KubeClient::Impl::dropIdle() {
  std::lock_guard lock(idleMutex_);
  idle_.clear();
}

bool KubeClient::Impl::waitUnlessCancelled(Duration duration) {
  return sleepUnlessStopped(options_.cancel, duration);
}

bool KubeClient::Impl::takeToken() {
  const auto wait = limiter_.reserve();
  return wait <= RateLimiter::Clock::duration::zero() ||
         waitUnlessCancelled(std::chrono::duration_cast<Duration>(wait));
}

httplib::Headers KubeClient::Impl::headers() {
  httplib::Headers headers{{"Accept", "application/json"}, {"User-Agent", options_.userAgent}};
  const std::string token = tokens_.current();
  if (!token.empty()) {
    headers.emplace("Authorization", "Bearer " + token);
  }
  return headers;
}

Result<httplib::Response> KubeClient::Impl::send(const Call& call) {
  count(call.verb);
  const bool idempotent = isIdempotent(call.method);
  Backoff backoff(kRetryInitial, kRetryMax);
  const std::string cancelled = call.what() + ": cancelled: the process is shutting down";
  bool freshConnection = false;
  for (int attempt = 0;; ++attempt) {
    if (options_.cancel.stop_requested() || !takeToken()) {
      return fail(cancelled);
    }
    std::unique_ptr<Connection> connection = freshConnection ? nullptr : takeIdle();
    if (!connection) {
      auto fresh = newConnection(options_.requestTimeout);
      if (!fresh) {
        return fail(fresh.error().context(call.what()));
      }
      connection = std::move(*fresh);
    }
    httplib::Request request;
    request.method = call.method;
    request.path = url_.basePath + call.path + queryString(call.query);
    request.headers = headers();
    if (!call.contentType.empty()) {
      request.body = call.body;
      request.set_header("Content-Type", call.contentType);
    }
    connection->verifyError.clear();
    const bool reused = connection->http->is_socket_open() != 0;
    const auto sentAt = std::chrono::steady_clock::now();
    httplib::Result result = [&] {
      RequestCancellation cancellation(*connection->http, options_.cancel, {});
      return connection->http->send(request);
    }();
    if (options_.cancel.stop_requested()) {
      return fail(cancelled);
    }
    if (!result) {
      const httplib::Error error = result.error();
      const std::string detail = transportError(error, *connection, config_.server);
      // Retry only what cannot have been processed, or cannot hurt:
      // - no connection was made (refused, connect timeout, TLS reset; not a refused
      //   certificate), or a kept-alive connection turned out closed when writing: any verb;
      // - a connection lost while reading, for idempotent verbs, unless the read timed out
      //   (a server that takes the whole timeout will take it again).
      const bool notSent =
          error == httplib::Error::Connection || error == httplib::Error::ConnectionTimeout ||
          (error == httplib::Error::SSLConnection && connection->verifyError.empty()) ||
          (error == httplib::Error::Write && reused);
      const bool timedOut =
          std::chrono::steady_clock::now() - sentAt >= options_.requestTimeout * 9 / 10;
      const bool lostRead = error == httplib::Error::Read && idempotent && !timedOut;
      if (attempt < options_.maxRetries && (notSent || lostRead)) {
        // A kept-alive connection that failed says the idle ones may be dead too (the
        // server restarted, or dropped them): retry on a fresh one, not on the next of them.
        if (reused) {
          dropIdle();
          freshConnection = true;
        }
        const Duration wait = reused ? Duration::zero() : backoff.next();
        log::debug("retrying Kubernetes request", {{"request", call.what()},
                                                   {"error", detail},
                                                   {"attempt", attempt + 1},
                                                   {"retryIn", formatDuration(wait)}});
        if (!waitUnlessCancelled(wait)) {
          return fail(cancelled);
        }
        continue;
      }
      return fail(call.what() + ": " + detail);
    }
    httplib::Response response = std::move(result.value());
    giveBack(std::move(connection));
    reportWarnings(call, response);
    const int status = response.status;
    if ((status == 429 || status >= 500) && attempt < options_.maxRetries) {
      const auto retryAfter = retryAfterOf(response);
      // 429 means the request was not processed; a 5xx is retried for idempotent verbs, or
      // when the server explicitly asks for a retry.
      if (status == 429 || idempotent || retryAfter) {
        const Duration wait = retryAfter ? *retryAfter : backoff.next();
        log::debug("retrying Kubernetes request", {{"request", call.what()},
                                                   {"status", status},
                                                   {"attempt", attempt + 1},
                                                   {"retryIn", formatDuration(wait)}});
        if (!waitUnlessCancelled(wait)) {
          return fail(cancelled);
        }
        continue;
      }
    }
    if (status < 200 || status > 299) {
      return fail(statusError(call.what(), status, response.body));
    }
    return response;
  }
}

Result<json> KubeClient::Impl::sendJson(const Call& call) {
  auto response = send(call);
  if (!response) {
    return fail(response.error());
  }
  if (response->body.empty()) {
    return json::object();
  }
  auto parsed = readJson(response->body);
  if (!parsed) {
    return fail(parsed.error().context(call.what() + ": response is not JSON"));
  }
  return parsed;
}

Result<void> KubeClient::Impl::watch(const std::string& path, const WatchOptions& options,
                                     const std::function<bool(const WatchEvent&)>& onEvent,
                                     std::stop_token stop) {
  count("watch");
  const std::string what = "GET " + path + " (watch)";
  if (stop.stop_requested() || options_.cancel.stop_requested()) {
    return {};
  }
  const int timeoutSeconds =
      options.timeoutSeconds > 0 ? options.timeoutSeconds : randomWatchTimeout();
  QueryParams query{{"watch", "1"}};
  if (!options.resourceVersion.empty()) {
    query.emplace_back("resourceVersion", options.resourceVersion);
  }
  if (options.allowBookmarks) {
    query.emplace_back("allowWatchBookmarks", "true");
  }
  if (!options.labelSelector.empty()) {
    query.emplace_back("labelSelector", options.labelSelector);
  }
  if (!options.fieldSelector.empty()) {
    query.emplace_back("fieldSelector", options.fieldSelector);
  }
  query.emplace_back("timeoutSeconds", std::to_string(timeoutSeconds));

  if (!takeToken()) {
    return {};  // cancelled: the process is shutting down
  }
  // Each watch has its own client, so that cutting it interrupts only this watch.
  auto made = newConnection(std::chrono::seconds(timeoutSeconds + kWatchReadSlackSeconds));
  if (!made) {
    return fail(made.error().context(what));
  }
  std::unique_ptr<Connection> connection = std::move(*made);
  httplib::ClientImpl& http = *connection->http;
  http.set_keep_alive(false);
  RequestCancellation cancellation(http, stop, options_.cancel);

  int status = 0;
  std::string errorBody;
  WatchStream stream;
  std::optional<Error> failure;
  bool endedByCaller = false;
  auto deliver = [&](const std::string& line) -> bool {
    auto event = parseWatchEvent(line);
    if (!event) {
      failure = event.error().context(what);
      return false;
    }
    if (event->type == "ERROR") {
      failure = watchErrorOf(*event).context(what);
      return false;
    }
    if (!onEvent(*event)) {
      endedByCaller = true;
      return false;
    }
    return true;
  };

  httplib::Request request;
  request.method = "GET";
  request.path = url_.basePath + path + queryString(query);
  request.headers = headers();
  request.response_handler = [&status](const httplib::Response& response) {
    status = response.status;
    return true;
  };
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) -> bool {
    if (cancellation.cut()) {
      return false;
    }
    if (status != 200) {
      if (errorBody.size() < 64 * 1024) {
        errorBody.append(data, std::min(size, 64 * 1024 - errorBody.size()));
      }
      return true;
    }
    for (const auto& line : stream.feed(std::string_view(data, size))) {
      if (!deliver(line)) {
        return false;
      }
    }
    if (stream.overflowed()) {
      failure = Error{what + ": a watch event is larger than " +
                          std::to_string(WatchStream::kMaxLineBytes / (1024 * 1024)) + " MiB",
                      0,
                      {}};
      return false;
    }
    return true;
  };

  httplib::Result result = http.send(request);
  if (cancellation.cut() || endedByCaller) {
    return {};
  }
  if (failure) {
    return fail(*failure);
  }
  if (status != 0 && status != 200) {
    return fail(statusError(what, status, errorBody));
  }
  if (!result) {
    return fail(what + ": " + transportError(result.error(), *connection, config_.server));
  }
  if (status == 0) {
    status = result->status;
    if (status != 200) {
      return fail(statusError(what, status, result->body));
    }
  }
  if (stream.pending() > 0) {
    // The server ended the stream without a final newline: the rest is one more event.
    auto rest = stream.feed("\n");
    for (const auto& line : rest) {
      if (!deliver(line)) {
        return failure ? fail(*failure) : Result<void>{};
      }
    }
  }
  return {};
}

Result<std::unique_ptr<KubeClient>> KubeClient::create(KubeConfig config,
                                                       KubeClientOptions options) {
  auto url = parseServerUrl(config.server);
  if (!url) {
    return fail(url.error());
  }
  if (options.requestTimeout <= Duration::zero()) {
    return fail("request timeout must be positive");
  }
  if (options.maxRetries < 0) {
    options.maxRetries = 0;
  }
  auto impl = std::make_unique<Impl>(std::move(config), std::move(options), std::move(*url));
  if (auto loaded = impl->loadCredentials(); !loaded) {
    return fail(loaded.error());
  }
  return std::unique_ptr<KubeClient>(new KubeClient(std::move(impl)));
}

KubeClient::KubeClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KubeClient::~KubeClient() = default;

Result<json> KubeClient::get(const KubeResource& resource, const std::string& ns,
                             const std::string& name) {
  return impl_->sendJson({"get", "GET", resource.objectPath(ns, name), {}, {}, {}});
}

Result<ListPage> KubeClient::list(const KubeResource& resource, const std::string& ns,
                                  const ListOptions& options) {
  QueryParams query;
  if (!options.labelSelector.empty()) {
    query.emplace_back("labelSelector", options.labelSelector);
  }
  if (!options.fieldSelector.empty()) {
    query.emplace_back("fieldSelector", options.fieldSelector);
  }
  if (options.limit > 0) {
    query.emplace_back("limit", std::to_string(options.limit));
  }
  if (!options.continueToken.empty()) {
    query.emplace_back("continue", options.continueToken);
  }
  if (!options.resourceVersion.empty()) {
    query.emplace_back("resourceVersion", options.resourceVersion);
  }
  const std::string path = resource.collectionPath(ns);
  auto body = impl_->sendJson({"list", "GET", path, std::move(query), {}, {}});
  if (!body) {
    return fail(body.error());
  }
  if (!body->is_object()) {
    return fail("GET " + path + ": the list is not a JSON object");
  }
  ListPage page;
  const json& metadata = body->value("metadata", json::object());
  if (metadata.is_object()) {
    page.resourceVersion = metadata.value("resourceVersion", std::string());
    page.continueToken = metadata.value("continue", std::string());
  }
  // List items carry no kind or apiVersion; fill them in from the list's, so items can be
  // written back or told apart like objects from get and watch.
  std::string kind = body->value("kind", std::string());
  if (kind.ends_with("List")) {
    kind.resize(kind.size() - 4);
  }
  const std::string apiVersion = body->value("apiVersion", std::string());
  auto items = body->find("items");
  if (items != body->end() && items->is_array()) {
    page.items.reserve(items->size());
    for (auto& item : *items) {
      if (item.is_object()) {
        if (!kind.empty() && !item.contains("kind")) {
          item["kind"] = kind;
        }
        if (!apiVersion.empty() && !item.contains("apiVersion")) {
          item["apiVersion"] = apiVersion;
        }
      }
      page.items.push_back(std::move(item));
    }
  } else if (items != body->end() && !items->is_null()) {
    return fail("GET " + path + ": items is not a list");
  }
  return page;
}

Result<ListPage> KubeClient::listAll(const KubeResource& resource, const std::string& ns,
                                     ListOptions options) {
  if (options.limit <= 0) {
    options.limit = 500;
  }
  auto first = list(resource, ns, options);
  if (!first) {
    return fail(first.error());
  }
  ListPage all = std::move(*first);
  // A continued list must not name a resourceVersion: the token carries it.
  options.resourceVersion.clear();
  while (!all.continueToken.empty()) {
    options.continueToken = all.continueToken;
    auto next = list(resource, ns, options);
    if (!next) {
      return fail(next.error());
    }
    for (auto& item : next->items) {
      all.items.push_back(std::move(item));
    }
    all.continueToken = next->continueToken;
  }
  return all;
}

namespace {

QueryParams writeQuery(const WriteOptions& options) {
  QueryParams query;
  if (options.dryRun) {
    query.emplace_back("dryRun", "All");
  }
  if (!options.fieldManager.empty()) {
    query.emplace_back("fieldManager", options.fieldManager);
  }
  return query;
}

std::string withSubresource(std::string path, const WriteOptions& options) {
  if (!options.subresource.empty()) {
    path += "/" + options.subresource;
  }
  return path;
}

}  // namespace

Result<json> KubeClient::create(const KubeResource& resource, const std::string& ns,
                                const json& object, const WriteOptions& options) {
  QueryParams query = writeQuery(options);
  std::string path = resource.collectionPath(ns);
  if (!options.subresource.empty()) {
    // POST to a subresource of a named object (pods/NAME/eviction, pods/NAME/binding).
    std::string name;
    if (object.is_object()) {
      const json& metadata = object.value("metadata", json::object());
      if (metadata.is_object()) {
        name = metadata.value("name", std::string());
      }
    }
    if (name.empty()) {
      return fail("POST " + path + ": creating a subresource needs metadata.name");
    }
    path = withSubresource(resource.objectPath(ns, name), options);
  }
  return impl_->sendJson(
      {"create", "POST", path, std::move(query), object.dump(), "application/json"});
}

Result<json> KubeClient::update(const KubeResource& resource, const std::string& ns,
                                const std::string& name, const json& object,
                                const WriteOptions& options) {
  QueryParams query = writeQuery(options);
  return impl_->sendJson({"update", "PUT", withSubresource(resource.objectPath(ns, name), options),
                          std::move(query), object.dump(), "application/json"});
}

Result<json> KubeClient::patch(const KubeResource& resource, const std::string& ns,
                               const std::string& name, PatchType type, const std::string& body,
                               const WriteOptions& options) {
  const std::string path = withSubresource(resource.objectPath(ns, name), options);
  std::string contentType;
  switch (type) {
    case PatchType::Merge:
      contentType = "application/merge-patch+json";
      break;
    case PatchType::StrategicMerge:
      contentType = "application/strategic-merge-patch+json";
      break;
    case PatchType::Json:
      contentType = "application/json-patch+json";
      break;
    case PatchType::Apply:
      contentType = "application/apply-patch+yaml";  // JSON is valid YAML
      break;
  }
  if (type == PatchType::Apply && options.fieldManager.empty()) {
    return fail("PATCH " + path + ": server-side apply needs a field manager");
  }
  if (type != PatchType::Apply && options.force) {
    return fail("PATCH " + path + ": force is only valid with server-side apply");
  }
  QueryParams query = writeQuery(options);
  if (options.force) {
    query.emplace_back("force", "true");
  }
  return impl_->sendJson({"patch", "PATCH", path, std::move(query), body, contentType});
}

Result<void> KubeClient::remove(const KubeResource& resource, const std::string& ns,
                                const std::string& name, const std::string& uid) {
  std::string body;
  std::string contentType;
  if (!uid.empty()) {
    body = json{{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"preconditions", {{"uid", uid}}}}
               .dump();
    contentType = "application/json";
  }
  auto response = impl_->send(
      {"delete", "DELETE", resource.objectPath(ns, name), {}, std::move(body), contentType});
  if (!response) {
    return fail(response.error());
  }
  return {};
}

Result<void> KubeClient::watch(const KubeResource& resource, const std::string& ns,
                               const WatchOptions& options,
                               const std::function<bool(const WatchEvent&)>& onEvent,
                               std::stop_token stop) {
  return impl_->watch(resource.collectionPath(ns), options, onEvent, std::move(stop));
}

RequestCounts KubeClient::requestCounts() const {
  return impl_->counts();
}

const std::string& KubeClient::server() const {
  return impl_->server();
}

}  // namespace gvirtus
