#include "common/http/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/tls/certificates.h"
#include "support/cluster_env.h"
#include "support/eventually.h"
#include "support/temp_dir.h"

namespace gvirtus {
namespace {

using namespace std::chrono_literals;
using testing::eventually;
using testing::TempDir;

// ---- Raw HTTP over loopback (MSG_NOSIGNAL: the test survives a server closing first) ----

class Socket {
 public:
  // `source`: the IPv4 loopback address to connect from (any of 127.0.0.0/8), to be another
  // peer.
  explicit Socket(int port, bool ipv6 = false, const char* source = nullptr) {
    fd_ = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (source != nullptr) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      ::inet_pton(AF_INET, source, &from.sin_addr);
      if (::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
        return;
      }
    }
    if (ipv6) {
      sockaddr_in6 addr{};
      addr.sin6_family = AF_INET6;
      addr.sin6_port = htons(static_cast<uint16_t>(port));
      addr.sin6_addr = in6addr_loopback;
      connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    } else {
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(port));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    }
  }
  // Closes with a reset instead of an orderly shutdown.
  void abort() {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    ::close(fd_);
    fd_ = -1;
  }
  ~Socket() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  bool send(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) {
        return false;
      }
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Everything until the peer closes (or 5 s pass).
  std::string readAll() {
    std::string out;
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

struct RawResponse {
  int status = 0;  // 0: no response
  std::string head;
  std::string body;
};

RawResponse parseResponse(const std::string& raw) {
  RawResponse r;
  auto end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) {
    return r;
  }
  r.status = std::stoi(raw.substr(9, 3));
  r.head = raw.substr(0, end);
  r.body = raw.substr(end + 4);
  return r;
}

RawResponse rawRequest(int port, const std::string& request, bool ipv6 = false) {
  Socket s(port, ipv6);
  if (!s.connected()) {
    return {};
  }
  s.send(request);  // may fail half way when the server answers early
  return parseResponse(s.readAll());
}

RawResponse get(int port, const std::string& target, const std::string& method = "GET") {
  return rawRequest(
      port, method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
}

RawResponse post(int port, const std::string& target, const std::string& body) {
  return rawRequest(port, "POST " + target +
                              " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                              "Content-Type: text/plain\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body);
}

// One response off a kept-alive connection: its head, and the body its Content-Length
// announces.
RawResponse readOne(Socket& s) {
  std::string raw;
  char buf[4096];
  for (;;) {
    auto end = raw.find("\r\n\r\n");
    if (end != std::string::npos) {
      auto at = raw.find("Content-Length: ");
      size_t length = at == std::string::npos ? 0 : std::stoul(raw.substr(at + 16));
      if (raw.size() >= end + 4 + length) {
        return parseResponse(raw.substr(0, end + 4 + length));
      }
    }
    ssize_t n = ::recv(s.fd(), buf, sizeof(buf), 0);
    if (n <= 0) {
      return parseResponse(raw);
    }
    raw.append(buf, static_cast<size_t>(n));
  }
}

// Sends `request` one byte every `gap`, as a slow client does, until the server answers or
// closes; then reads what it answered.
struct Trickled {
  RawResponse response;
  std::chrono::steady_clock::duration took{};  // from the first byte to the answer
};
Trickled trickle(Socket& s, const std::string& request, std::chrono::milliseconds gap) {
  Trickled result;
  auto begin = std::chrono::steady_clock::now();
  for (char c : request) {
    if (!s.send(std::string(1, c))) {
      break;
    }
    pollfd ready{s.fd(), POLLIN, 0};
    if (::poll(&ready, 1, static_cast<int>(gap.count())) > 0) {
      break;  // answered, or closed
    }
  }
  result.response = parseResponse(s.readAll());
  result.took = std::chrono::steady_clock::now() - begin;
  return result;
}

bool hasIpv6Loopback() {
  int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) {
    return false;
  }
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// Restores the SIGPIPE disposition it found.
class DefaultSigpipe {
 public:
  DefaultSigpipe() { previous_ = ::signal(SIGPIPE, SIG_DFL); }
  ~DefaultSigpipe() { ::signal(SIGPIPE, previous_); }
  DefaultSigpipe(const DefaultSigpipe&) = delete;
  DefaultSigpipe& operator=(const DefaultSigpipe&) = delete;

 private:
  sighandler_t previous_;
};

// ---- TLS client --------------------------------------------------------------------------

struct SslCtxFree {
  void operator()(SSL_CTX* p) const { SSL_CTX_free(p); }
};
struct SslFree {
  void operator()(SSL* p) const { SSL_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};

struct TlsResult {
  bool handshake = false;
  std::string version;  // "TLSv1.2", ...
  int alertReason = 0;  // ERR_GET_REASON of the handshake failure
  std::string error;
  RawResponse response;
};

// Connects to 127.0.0.1:port trusting only `caPem` (and checking the IP SAN), with the
// protocol versions limited to [minVersion, maxVersion], then GETs `path`.
TlsResult tlsGet(int port, const std::string& caPem, int minVersion = TLS1_2_VERSION,
                 int maxVersion = 0, const std::string& path = "/hello") {
  TlsResult result;
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, SslCtxFree> ctx(SSL_CTX_new(TLS_client_method()));
  SSL_CTX_set_security_level(ctx.get(), 0);  // let the client offer old protocols
  SSL_CTX_set_cipher_list(ctx.get(), "DEFAULT:@SECLEVEL=0");
  SSL_CTX_set_min_proto_version(ctx.get(), minVersion);
  SSL_CTX_set_max_proto_version(ctx.get(), maxVersion);
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(caPem.data(), static_cast<int>(caPem.size())));
  std::unique_ptr<X509, X509Free> ca(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  REQUIRE(ca);
  X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), ca.get());
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);

  Socket sock(port);
  if (!sock.connected()) {
    result.error = "connect failed";
    return result;
  }
  std::unique_ptr<SSL, SslFree> ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), sock.fd());
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), "127.0.0.1");
  if (SSL_connect(ssl.get()) != 1) {
    unsigned long code = ERR_peek_last_error();
    result.alertReason = ERR_GET_REASON(code);
    char buf[256];
    ERR_error_string_n(code, buf, sizeof(buf));
    result.error = buf;
    ERR_clear_error();
    return result;
  }
  result.handshake = true;
  result.version = SSL_get_version(ssl.get());
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  SSL_write(ssl.get(), request.data(), static_cast<int>(request.size()));
  std::string raw;
  char buf[4096];
  for (;;) {
    int n = SSL_read(ssl.get(), buf, sizeof(buf));
    if (n <= 0) {
      break;
    }
    raw.append(buf, static_cast<size_t>(n));
  }
  ERR_clear_error();
  result.response = parseResponse(raw);
  return result;
}

struct Pki {
  PemKeyPair ca;
  PemKeyPair serving;
};

Pki makePki(const std::string& name) {
  auto ca = generateCa(name + " CA", std::chrono::hours(24));
  REQUIRE(ca);
  auto serving =
      generateServingCert(*ca, "localhost", {"localhost"}, {"127.0.0.1"}, std::chrono::hours(24));
  REQUIRE(serving);
  return {*ca, *serving};
}

void writeFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

HttpResponse text(std::string body, int status = 200) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

std::unique_ptr<HttpServer> startServer(HttpServerOptions options) {
  options.address = "127.0.0.1:0";
  auto server = HttpServer::create(std::move(options));
  REQUIRE(server);
  (*server)->handle("GET", "/hello", [](const HttpRequest&) { return text("hello\n"); });
  return std::move(*server);
}

void startOrFail(HttpServer& server) {
  auto started = server.start();
  REQUIRE(started);
  REQUIRE(server.port() > 0);
}

}  // namespace

TEST_CASE("HttpServer routes plain HTTP requests", "[http_server]") {
  HttpServerOptions options;
  auto server = startServer(options);
  server->handle("POST", "/echo", [](const HttpRequest& req) {
    HttpResponse r;
    r.status = 201;
    r.body = req.method + " " + req.path + " " + req.queryParam("name") + " " +
             req.header("x-test") + " " + req.body;
    r.contentType = "application/json";
    r.headers.emplace_back("X-Reply", "yes");
    return r;
  });
  server->handle("GET", "/remote", [](const HttpRequest& req) {
    return text(req.remoteAddr + (req.hasHeader("REMOTE_ADDR") ? " leaked" : ""));
  });
  startOrFail(*server);
  int port = server->port();

  auto hello = get(port, "/hello");
  CHECK(hello.status == 200);
  CHECK(hello.body == "hello\n");
  CHECK(hello.head.find("Content-Type: text/plain; charset=utf-8") != std::string::npos);

  auto echo = rawRequest(port,
                         "POST /echo?name=a%20b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                         "X-Test: v1\r\nContent-Length: 4\r\n\r\nbody");
  CHECK(echo.status == 201);
  CHECK(echo.body == "POST /echo a b v1 body");
  CHECK(echo.head.find("X-Reply: yes") != std::string::npos);
  CHECK(echo.head.find("Content-Type: application/json") != std::string::npos);

  CHECK(get(port, "/remote").body == "127.0.0.1");
  CHECK(get(port, "/missing").status == 404);
  auto wrongMethod = get(port, "/echo");
  CHECK(wrongMethod.status == 405);
  CHECK(wrongMethod.head.find("Allow: POST") != std::string::npos);
  auto head = get(port, "/hello", "HEAD");
  CHECK(head.status == 200);
  CHECK(head.body.empty());
  CHECK(post(port, "/missing", "x").status == 404);
}

TEST_CASE("HttpServer keeps connections alive and pipelines", "[http_server]") {
  auto server = startServer({});
  startOrFail(*server);
  Socket s(server->port());
  REQUIRE(s.connected());
  std::string one = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string last = "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  REQUIRE(s.send(one + one + last));
  std::string all = s.readAll();
  size_t count = 0;
  for (size_t at = all.find("HTTP/1.1 200"); at != std::string::npos;
       at = all.find("HTTP/1.1 200", at + 1)) {
    ++count;
  }
  CHECK(count == 3);
}

TEST_CASE("HttpServer answers 500 when a handler throws", "[http_server]") {
  auto server = startServer({});
  server->handle("GET", "/throw",
                 [](const HttpRequest&) -> HttpResponse { throw std::runtime_error("boom"); });
  server->handle("GET", "/throw-int", [](const HttpRequest&) -> HttpResponse { throw 42; });
  startOrFail(*server);
  CHECK(get(server->port(), "/throw").status == 500);
  CHECK(get(server->port(), "/throw-int").status == 500);
  CHECK(get(server->port(), "/hello").status == 200);
}

TEST_CASE("HttpServer refuses bodies over the limit with 413", "[http_server]") {
  HttpServerOptions options;
  options.maxBodyBytes = 1024;
  auto server = startServer(options);
  server->handle("POST", "/echo", [](const HttpRequest& req) { return text(req.body); });
  startOrFail(*server);
  int port = server->port();

  SECTION("at the limit is served") {
    std::string body(1024, 'a');
    auto r = post(port, "/echo", body);
    CHECK(r.status == 200);
    CHECK(r.body == body);
  }
  SECTION("declared length over the limit") {
    auto r = post(port, "/echo", std::string(1025, 'a'));
    CHECK(r.status == 413);
    CHECK(r.head.find("Connection: close") != std::string::npos);
  }
  SECTION("a huge declared length is not read") {
    Socket s(port);
    REQUIRE(s.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\nabc"));
    auto r = parseResponse(s.readAll());
    CHECK(r.status == 413);
  }
  SECTION("chunked body over the limit") {
    std::string request = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 8; ++i) {
      request += "200\r\n" + std::string(512, 'b') + "\r\n";
    }
    request += "0\r\n\r\n";
    auto r = rawRequest(port, request);
    CHECK(r.status == 413);
  }
  SECTION("chunked body within the limit") {
    auto r = rawRequest(port,
                        "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
    CHECK(r.status == 200);
    CHECK(r.body == "abcde");
  }
  SECTION("Expect: 100-continue over the limit") {
    Socket s(port);
    REQUIRE(s.send(
        "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5000\r\n\r\n"));
    auto r = parseResponse(s.readAll());
    CHECK(r.status == 413);
  }
  SECTION("an endless header line is cut off") {
    Socket s(port);
    std::string junk = "GET /hello HTTP/1.1\r\nX-Junk: " + std::string(256 * 1024, 'j');
    s.send(junk);
    auto r = parseResponse(s.readAll());
    CHECK(r.status != 200);
  }
  // The server survives each of them.
  CHECK(get(port, "/hello").status == 200);
}

TEST_CASE("HttpServer answers a malformed request and closes the connection", "[http_server]") {
  auto server = startServer({});
  server->handle("POST", "/echo", [](const HttpRequest& req) { return text(req.body); });
  startOrFail(*server);
  int port = server->port();
  // Whatever follows a refused request is not read as another one: one answer, then EOF.
  auto once = [&](const std::string& request) {
    Socket s(port);
    s.send(request + "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    std::string all = s.readAll();
    auto r = parseResponse(all);
    CHECK(all.find("HTTP/1.1", 1) == std::string::npos);
    CHECK(r.head.find("Connection: close") != std::string::npos);
    return r.status;
  };
  CHECK(once("POST /echo HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
             "0\r\n\r\n") == 400);
  CHECK(once("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n") == 400);
  CHECK(once("GET /hello HTTP/1.1\r\nX: a\r\n folded\r\n\r\n") == 400);
  CHECK(once("GET /hello HTTP/3.0\r\n\r\n") == 505);
  CHECK(once("GET /hello HTTP/1.1\r\n" + std::string(70 * 1024, 'x') + "\r\n\r\n") == 431);
  CHECK(once("POST /missing HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc") == 404);

  // HTTP/1.0 closes unless asked to keep the connection alive.
  Socket old(port);
  REQUIRE(old.send("GET /hello HTTP/1.0\r\n\r\n"));
  auto closed = parseResponse(old.readAll());
  CHECK(closed.status == 200);
  CHECK(closed.head.find("Connection: close") != std::string::npos);
  Socket kept(port);
  REQUIRE(
      kept.send("GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                "GET /hello HTTP/1.0\r\n\r\n"));
  std::string both = kept.readAll();
  CHECK(both.find("Connection: keep-alive") != std::string::npos);
  CHECK(both.find("HTTP/1.1 200", 1) != std::string::npos);
}

TEST_CASE("HttpServer answers Expect: 100-continue before reading the body", "[http_server]") {
  auto server = startServer({});
  server->handle("POST", "/echo", [](const HttpRequest& req) { return text(req.body); });
  startOrFail(*server);
  Socket s(server->port());
  REQUIRE(
      s.send("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
             "Connection: close\r\nContent-Length: 4\r\n\r\n"));
  char buf[64] = {};
  ssize_t n = ::recv(s.fd(), buf, sizeof(buf), 0);
  REQUIRE(n > 0);
  CHECK(std::string(buf, static_cast<size_t>(n)) == "HTTP/1.1 100 Continue\r\n\r\n");
  REQUIRE(s.send("body"));
  auto r = parseResponse(s.readAll());
  CHECK(r.status == 200);
  CHECK(r.body == "body");
}

TEST_CASE("HttpServer reports a port in use", "[http_server]") {
  auto first = startServer({});
  startOrFail(*first);
  HttpServerOptions options;
  options.address = "127.0.0.1:" + std::to_string(first->port());
  auto second = HttpServer::create(options);
  REQUIRE(second);
  auto started = (*second)->start();
  REQUIRE_FALSE(started);
  CHECK(started.error().message.find("in use") != std::string::npos);
  CHECK(started.error().message.find(std::to_string(first->port())) != std::string::npos);
  CHECK(get(first->port(), "/hello").status == 200);
}

TEST_CASE("HttpServer listens on every interface or on IPv6", "[http_server]") {
  HttpServerOptions options;
  options.address = ":0";
  auto any = HttpServer::create(options);
  REQUIRE(any);
  (*any)->handle("GET", "/hello", [](const HttpRequest& req) { return text(req.remoteAddr); });
  REQUIRE((*any)->start());
  std::string request = "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  // IPv4 peers show as IPv4 even on a dual-stack socket.
  CHECK(rawRequest((*any)->port(), request).body == "127.0.0.1");
  if (!hasIpv6Loopback()) {
    return;
  }
  CHECK(rawRequest((*any)->port(), request, true).body == "::1");

  options.address = "[::1]:0";
  auto v6 = HttpServer::create(options);
  REQUIRE(v6);
  (*v6)->handle("GET", "/hello", [](const HttpRequest& req) { return text(req.remoteAddr); });
  REQUIRE((*v6)->start());
  CHECK(rawRequest((*v6)->port(), request, true).body == "::1");
}

TEST_CASE("HttpServer survives clients that leave mid-response", "[http_server][tls]") {
  DefaultSigpipe sigpipe;  // a write to a closed socket must not kill the process
  Pki pki = makePki("sigpipe");
  bool useTls = GENERATE(false, true);
  HttpServerOptions options;
  if (useTls) {
    options.certificate = pki.serving;
  }
  auto server = startServer(options);
  server->handle("GET", "/big",
                 [](const HttpRequest&) { return text(std::string(16 << 20, 'x')); });
  startOrFail(*server);
  int port = server->port();
  for (int i = 0; i < 3; ++i) {
    Socket s(port);
    REQUIRE(s.connected());
    std::string request = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
    if (useTls) {
      std::unique_ptr<SSL_CTX, SslCtxFree> ctx(SSL_CTX_new(TLS_client_method()));
      std::unique_ptr<SSL, SslFree> ssl(SSL_new(ctx.get()));
      SSL_set_fd(ssl.get(), s.fd());
      REQUIRE(SSL_connect(ssl.get()) == 1);
      REQUIRE(SSL_write(ssl.get(), request.data(), static_cast<int>(request.size())) > 0);
      char buf[1024];
      REQUIRE(SSL_read(ssl.get(), buf, sizeof(buf)) > 0);
    } else {
      REQUIRE(s.send(request));
      char buf[1024];
      REQUIRE(::recv(s.fd(), buf, sizeof(buf), 0) > 0);
    }
    s.abort();
  }
  // The server has let go of every aborted connection (its writes failed, not the process).
  REQUIRE(eventually([&] { return server->openConnections() == 0; }));
  if (useTls) {
    CHECK(tlsGet(port, pki.ca.certPem).response.status == 200);
  } else {
    CHECK(get(port, "/hello").status == 200);
  }
}

TEST_CASE("HttpServer rejects bad options", "[http_server]") {
  HttpServerOptions options;
  options.address = "nonsense";
  CHECK_FALSE(HttpServer::create(options));
  options.address = "127.0.0.1:0";
  options.certFile = "/nonexistent/tls.crt";
  options.keyFile = "/nonexistent/tls.key";
  auto missing = HttpServer::create(options);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message.find("/nonexistent/tls.crt") != std::string::npos);
  options.certFile.clear();
  options.keyFile.clear();
  options.certificate = PemKeyPair{"not a certificate", "not a key"};
  CHECK_FALSE(HttpServer::create(options));
  options.certificate.reset();
  options.stayForNextRequest = -1ms;
  CHECK_FALSE(HttpServer::create(options));
}

TEST_CASE("HttpServer stops promptly and only once", "[http_server]") {
  auto server = startServer({});
  startOrFail(*server);
  int port = server->port();
  // An idle keep-alive connection and a half-sent request must not hold stop() up.
  Socket idle(port);
  REQUIRE(idle.connected());
  REQUIRE(idle.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
  Socket partial(port);
  REQUIRE(partial.send("GET /hello HTTP/1.1\r\n"));
  REQUIRE(eventually([&] { return server->openConnections() == 2; }));
  auto begin = std::chrono::steady_clock::now();
  server->stop();
  CHECK(std::chrono::steady_clock::now() - begin < 2s);
  server->stop();
  CHECK_FALSE(server->start());
  CHECK(get(port, "/hello").status == 0);
}

TEST_CASE("HttpServer closes connections beyond its workers and queue", "[http_server]") {
  HttpServerOptions options;
  options.workers = 2;
  options.maxQueued = 2;
  auto server = startServer(options);
  server->handle("GET", "/slow", [](const HttpRequest&) {
    std::this_thread::sleep_for(300ms);
    return text("slow\n");
  });
  startOrFail(*server);
  int port = server->port();

  constexpr int kClients = 40;
  std::atomic<int> served{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> clients;
  auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&] {
      auto r = get(port, "/slow");
      if (r.status == 200) {
        ++served;
      } else {
        ++refused;
      }
    });
  }
  for (auto& t : clients) {
    t.join();
  }
  auto elapsed = std::chrono::steady_clock::now() - begin;
  CHECK(served + refused == kClients);
  CHECK(served >= 2);
  CHECK(refused > 0);
  CHECK(server->rejectedConnections() > 0);
  // Refused connections were closed at once: nobody waited for 40 slow requests in turn.
  CHECK(elapsed < 5s);
  CHECK(get(port, "/hello").status == 200);
}

TEST_CASE("HttpServer idle keep-alive connections yield to waiting ones", "[http_server]") {
  HttpServerOptions options;
  options.workers = 1;
  options.maxQueued = 4;
  options.keepAliveTimeout = 60s;
  auto server = startServer(options);
  startOrFail(*server);
  int port = server->port();
  Socket idle(port);
  REQUIRE(idle.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
  char buf[512];
  REQUIRE(::recv(idle.fd(), buf, sizeof(buf), 0) > 0);  // served; now idle, kept alive
  auto begin = std::chrono::steady_clock::now();
  CHECK(get(port, "/hello").status == 200);
  CHECK(std::chrono::steady_clock::now() - begin < 2s);
}

TEST_CASE("HttpServer closes a request that trickles past its deadline with 408", "[http_server]") {
  HttpServerOptions options;
  options.requestTimeout = 600ms;
  auto server = startServer(options);
  server->handle("POST", "/echo", [](const HttpRequest& req) { return text(req.body); });
  startOrFail(*server);
  Socket s(server->port());
  REQUIRE(s.connected());
  // Each byte comes well within any per-read timeout; the whole request never comes in time.
  SECTION("its head") {
    auto t = trickle(
        s, "GET /hello HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(100, 'p') + "\r\n\r\n", 50ms);
    CHECK(t.response.status == 408);
    CHECK(t.response.head.find("Connection: close") != std::string::npos);
    CHECK(t.took >= 550ms);
    CHECK(t.took < 3s);
  }
  SECTION("its body") {
    REQUIRE(s.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"));
    auto t = trickle(s, std::string(100, 'b'), 50ms);
    CHECK(t.response.status == 408);
    CHECK(t.took < 3s);
  }
  SECTION("empty lines before it") {
    std::string emptyLines;
    for (int i = 0; i < 100; ++i) {
      emptyLines += "\r\n";
    }
    auto t = trickle(s, emptyLines, 50ms);
    CHECK(t.response.status == 408);
  }
  CHECK(server->timedOutConnections() == 1);
  // A request that arrives in time on a new connection is served.
  CHECK(get(server->port(), "/hello").status == 200);
}

TEST_CASE("HttpServer serves a slow request that arrives within its deadline", "[http_server]") {
  HttpServerOptions options;
  options.requestTimeout = 5s;
  auto server = startServer(options);
  startOrFail(*server);
  Socket s(server->port());
  auto t = trickle(s, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 10ms);
  CHECK(t.response.status == 200);
  CHECK(server->timedOutConnections() == 0);
}

TEST_CASE("HttpServer gives no worker to a client that trickles its request", "[http_server]") {
  HttpServerOptions options;
  options.workers = 1;
  options.maxQueued = 1;
  auto server = startServer(options);
  startOrFail(*server);
  int port = server->port();
  // More slow clients than workers and queue together, each sending a byte every 100 ms of
  // a request that would take seconds.
  constexpr int kSlow = 8;
  std::atomic<int> started{0};
  std::vector<std::jthread> slow;  // stopped and joined however the test ends
  for (int i = 0; i < kSlow; ++i) {
    slow.emplace_back([&](std::stop_token stop) {
      Socket s(port);
      std::string request = "GET /hello HTTP/1.1\r\nX-Pad: " + std::string(200, 'p') + "\r\n\r\n";
      for (size_t at = 0; at < request.size() && !stop.stop_requested(); ++at) {
        if (!s.send(request.substr(at, 1))) {
          break;
        }
        if (at == 0) {
          ++started;
        }
        std::this_thread::sleep_for(100ms);  // the trickle itself
      }
    });
  }
  REQUIRE(eventually([&] { return started == kSlow && server->openConnections() == kSlow; }));
  auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    CHECK(get(port, "/hello").status == 200);
  }
  CHECK(std::chrono::steady_clock::now() - begin < 2s);
  CHECK(server->rejectedConnections() == 0);
}

TEST_CASE("HttpServer gives no worker to a kept-alive client that trickles its next request",
          "[http_server]") {
  HttpServerOptions options;
  options.workers = 2;
  // Longer than the client's gaps between two bytes, even on a loaded machine.
  options.stayForNextRequest = 300ms;
  auto server = startServer(options);
  // Answers once two requests are served at once, so it needs both workers free.
  std::mutex mutex;
  std::condition_variable pairing;
  int arrived = 0;
  server->handle("GET", "/pair", [&](const HttpRequest&) {
    std::unique_lock lock(mutex);
    int pair = (++arrived + 1) / 2;  // 1 for the first two, 2 for the next two
    pairing.notify_all();
    bool paired = pairing.wait_for(lock, 5s, [&] { return arrived >= 2 * pair; });
    return text(paired ? "paired\n" : "alone\n", paired ? 200 : 503);
  });
  startOrFail(*server);
  int port = server->port();
  auto bothWorkersServe = [&] {
    RawResponse first;
    std::jthread other([&] { first = get(port, "/pair"); });
    int second = get(port, "/pair").status;
    other.join();
    return first.status == 200 && second == 200;
  };
  // Both workers run and are idle again: the one that answers the client below may stay.
  REQUIRE(bothWorkersServe());
  // The worker that answered this client stays for its next request, which then comes a
  // byte per millisecond, for far longer than the stay: the worker goes back to serving
  // others when the stay ends, however steadily the bytes come.
  std::atomic<bool> trickling{false};
  std::jthread slow([&](std::stop_token stop) {
    Socket s(port);
    int one = 1;  // each byte its own segment, as sent
    ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (!s.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n") || readOne(s).status != 200) {
      return;
    }
    std::string next = "GET /hello HTTP/1.1\r\nX-Pad: " + std::string(30000, 'p') + "\r\n\r\n";
    for (size_t at = 0; at < next.size() && !stop.stop_requested(); ++at) {
      if (!s.send(next.substr(at, 1))) {
        break;
      }
      trickling = at > 20;
      std::this_thread::sleep_for(1ms);  // the trickle itself
    }
  });
  REQUIRE(eventually([&] { return trickling.load(); }));
  CHECK(bothWorkersServe());
}

TEST_CASE("HttpServer closes a TLS handshake past its deadline", "[http_server][tls]") {
  Pki pki = makePki("handshake");
  HttpServerOptions options;
  options.certificate = pki.serving;
  options.handshakeTimeout = 300ms;
  auto server = startServer(options);
  startOrFail(*server);
  Socket silent(server->port());
  REQUIRE(silent.connected());
  auto begin = std::chrono::steady_clock::now();
  CHECK(silent.readAll().empty());  // closed by the server, no ClientHello ever sent
  auto took = std::chrono::steady_clock::now() - begin;
  CHECK(took >= 250ms);
  CHECK(took < 3s);
  CHECK(server->timedOutConnections() == 1);
  CHECK(tlsGet(server->port(), pki.ca.certPem).response.status == 200);
}

TEST_CASE("HttpServer limits the connections of one peer", "[http_server]") {
  HttpServerOptions options;
  options.maxConnectionsPerPeer = 3;
  auto server = startServer(options);
  startOrFail(*server);
  int port = server->port();
  std::vector<std::unique_ptr<Socket>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<Socket>(port));
    REQUIRE(held.back()->connected());
  }
  REQUIRE(eventually([&] { return server->openConnections() == 3; }));

  // The fourth from the same address is closed at once, without an answer.
  Socket fourth(port);
  REQUIRE(fourth.connected());
  fourth.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  auto begin = std::chrono::steady_clock::now();
  CHECK(fourth.readAll().empty());
  CHECK(std::chrono::steady_clock::now() - begin < 2s);
  CHECK(server->peerRejectedConnections() == 1);

  // Another peer is served; so is this one once it has closed one of its connections.
  Socket other(port, false, "127.0.0.2");
  REQUIRE(other.connected());
  REQUIRE(other.send("GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  CHECK(parseResponse(other.readAll()).status == 200);
  held.pop_back();
  REQUIRE(eventually([&] { return server->openConnections() == 2; }));
  CHECK(get(port, "/hello").status == 200);
  CHECK(server->peerRejectedConnections() == 1);
}

TEST_CASE("HttpServer keeps a connection idle between requests past the request deadline",
          "[http_server]") {
  HttpServerOptions options;
  options.requestTimeout = 300ms;
  options.keepAliveTimeout = 30s;
  auto server = startServer(options);
  startOrFail(*server);
  Socket s(server->port());
  REQUIRE(s.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto first = readOne(s);
  CHECK(first.status == 200);
  CHECK(first.head.find("Connection: keep-alive") != std::string::npos);
  // Idle for longer than a request may take to arrive: proven by a request begun after
  // the first answer, never finished, timing out (408) while this connection idles.
  Socket partial(server->port());
  REQUIRE(partial.send("GET /hello HTTP/1.1\r\n"));
  REQUIRE(eventually([&] { return server->timedOutConnections() == 1; }));
  REQUIRE(s.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto second = readOne(s);
  CHECK(second.status == 200);
  CHECK(second.body == "hello\n");
  // Only the unfinished request timed out, not the idle connection.
  CHECK(server->timedOutConnections() == 1);
}

TEST_CASE("HttpServer serves TLS 1.2 and 1.3 but not older", "[http_server][tls]") {
  Pki pki = makePki("first");
  HttpServerOptions options;
  options.certificate = pki.serving;
  auto server = startServer(options);
  CHECK(server->tls());
  startOrFail(*server);
  int port = server->port();

  auto tls12 = tlsGet(port, pki.ca.certPem, TLS1_2_VERSION, TLS1_2_VERSION);
  CHECK(tls12.handshake);
  CHECK(tls12.version == "TLSv1.2");
  CHECK(tls12.response.status == 200);
  CHECK(tls12.response.body == "hello\n");

  auto tls13 = tlsGet(port, pki.ca.certPem, TLS1_3_VERSION, TLS1_3_VERSION);
  CHECK(tls13.handshake);
  CHECK(tls13.version == "TLSv1.3");
  CHECK(tls13.response.status == 200);

  auto tls11 = tlsGet(port, pki.ca.certPem, TLS1_1_VERSION, TLS1_1_VERSION);
  CHECK_FALSE(tls11.handshake);
  INFO(tls11.error);
  // Refused by the server (a protocol_version alert), not by the client itself.
  CHECK(tls11.alertReason == SSL_R_TLSV1_ALERT_PROTOCOL_VERSION);

  // Plain HTTP on the TLS port gets nowhere, and the server carries on.
  CHECK(get(port, "/hello").status == 0);
  CHECK(tlsGet(port, pki.ca.certPem).response.status == 200);
}

TEST_CASE("HttpServer rotates an in-memory certificate", "[http_server][tls]") {
  Pki first = makePki("first");
  Pki second = makePki("second");
  HttpServerOptions options;
  options.certificate = first.serving;
  auto server = startServer(options);
  startOrFail(*server);
  int port = server->port();

  CHECK(tlsGet(port, first.ca.certPem).handshake);
  CHECK_FALSE(tlsGet(port, second.ca.certPem).handshake);

  // A mismatched pair is refused and the old one keeps serving.
  CHECK_FALSE(server->setCertificate({second.serving.certPem, first.serving.keyPem}));
  CHECK(tlsGet(port, first.ca.certPem).handshake);

  REQUIRE(server->setCertificate(second.serving));
  auto after = tlsGet(port, second.ca.certPem);
  CHECK(after.handshake);
  CHECK(after.response.status == 200);
  CHECK_FALSE(tlsGet(port, first.ca.certPem).handshake);
}

TEST_CASE("HttpServer without a certificate yet fails handshakes", "[http_server][tls]") {
  Pki pki = makePki("late");
  HttpServerOptions options;
  options.tls = true;
  auto server = startServer(options);
  startOrFail(*server);
  CHECK_FALSE(tlsGet(server->port(), pki.ca.certPem).handshake);
  REQUIRE(server->setCertificate(pki.serving));
  CHECK(tlsGet(server->port(), pki.ca.certPem).response.status == 200);
}

TEST_CASE("HttpServer reports the notAfter of the certificate it serves", "[http_server][tls]") {
  HttpServerOptions options;
  options.tls = true;
  auto server = startServer(options);
  CHECK_FALSE(server->certificateNotAfter());
  Pki pki = makePki("expiry");
  REQUIRE(server->setCertificate(pki.serving));
  auto end = server->certificateNotAfter();
  REQUIRE(end);
  CHECK(*end == *certificateNotAfter(pki.serving.certPem));
  // makePki's certificates last a day.
  const auto left = *end - std::chrono::system_clock::now();
  CHECK(left > std::chrono::hours(23));
  CHECK(left <= std::chrono::hours(24));
  CHECK_FALSE(startServer({})->certificateNotAfter());
}

TEST_CASE("HttpServer setCertificate on a plain server is an error", "[http_server]") {
  Pki pki = makePki("plain");
  auto server = startServer({});
  CHECK_FALSE(server->tls());
  CHECK_FALSE(server->setCertificate(pki.serving));
}

TEST_CASE("HttpServer reloads certificate files when they change", "[http_server][tls]") {
  Pki first = makePki("first");
  Pki second = makePki("second");
  TempDir dir;
  std::string certFile = dir.file("tls.crt");
  std::string keyFile = dir.file("tls.key");
  writeFile(certFile, first.serving.certPem);
  writeFile(keyFile, first.serving.keyPem);

  HttpServerOptions options;
  options.certFile = certFile;
  options.keyFile = keyFile;
  options.certificateCheckInterval = Duration::zero();  // every handshake looks
  auto server = startServer(options);
  startOrFail(*server);
  int port = server->port();
  REQUIRE(tlsGet(port, first.ca.certPem).response.status == 200);

  auto waitFor = [&](const std::string& caPem) {
    return gvirtus::testing::eventually([&] { return tlsGet(port, caPem).handshake; }, 6s, 100ms);
  };

  // A broken pair (the key of another certificate) keeps the old pair serving.
  writeFile(certFile, second.serving.certPem);
  CHECK(tlsGet(port, first.ca.certPem).handshake);  // triggers the check, fails, keeps
  CHECK(tlsGet(port, first.ca.certPem).handshake);
  CHECK_FALSE(tlsGet(port, second.ca.certPem).handshake);

  // Completing the pair switches to it.
  writeFile(keyFile, second.serving.keyPem);
  CHECK(waitFor(second.ca.certPem));
  auto after = tlsGet(port, second.ca.certPem);
  CHECK(after.response.status == 200);
  CHECK_FALSE(tlsGet(port, first.ca.certPem).handshake);

  // A replacement by rename (as Kubernetes secret volumes do) is seen too.
  std::string newCert = dir.file("tls.crt.new");
  std::string newKey = dir.file("tls.key.new");
  writeFile(newCert, first.serving.certPem);
  writeFile(newKey, first.serving.keyPem);
  std::filesystem::rename(newKey, keyFile);
  std::filesystem::rename(newCert, certFile);
  CHECK(waitFor(first.ca.certPem));
}

}  // namespace gvirtus
