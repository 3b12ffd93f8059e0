// gvirtus-webhook under slow clients (issue 40, item 5): connections that trickle their
// requests one byte a second hold no worker, are closed at the request deadline, and one
// peer cannot open more than its share of connections, while the API server's reviews are
// answered as fast as ever. The real binary on loopback, with the defaults it ships with.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "support/cluster_env.h"
#include "webhook/fixtures.h"
#include "webhook/webhook_process.h"

using namespace gvirtus::webhook::testing;
using namespace std::chrono_literals;
using gvirtus::testing::eventually;
using Clock = std::chrono::steady_clock;

namespace {

// A TCP connection to 127.0.0.1:port from `source` (any address of 127.0.0.0/8 is this
// host's, so each stands for another peer); -1 when it cannot connect.
int connectFrom(const char* source, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    if (fd >= 0) {
      ::close(fd);
    }
    return -1;
  }
  return fd;
}

// The server has closed this connection (or reset it); without waiting.
bool closedByServer(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) {
    return false;
  }
  char c = 0;
  ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

struct SslCtxFree {
  void operator()(SSL_CTX* p) const { SSL_CTX_free(p); }
};
struct SslFree {
  void operator()(SSL* p) const { SSL_free(p); }
};

// A client that has finished its TLS handshake and then sends its request one byte a
// second: it never finishes in time.
class SlowClient {
 public:
  SlowClient(SSL_CTX* ctx, const char* source, int port, std::string request)
      : fd_(connectFrom(source, port)), request_(std::move(request)) {
    if (fd_ < 0) {
      return;
    }
    ssl_.reset(SSL_new(ctx));
    SSL_set_fd(ssl_.get(), fd_);
    connected_ = SSL_connect(ssl_.get()) == 1;
    ERR_clear_error();
  }
  ~SlowClient() {
    ssl_.reset();
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  SlowClient(const SlowClient&) = delete;
  SlowClient& operator=(const SlowClient&) = delete;

  bool connected() const { return connected_; }
  bool finished() const { return finished_; }
  int fd() const { return fd_; }
  const std::string& answer() const { return answer_; }
  Clock::time_point firstByte() const { return firstByte_; }
  Clock::time_point end() const { return end_; }

  // The next byte of the request.
  void sendByte() {
    if (finished_ || sent_ >= request_.size()) {
      return;
    }
    if (sent_ == 0) {
      firstByte_ = Clock::now();
    }
    if (SSL_write(ssl_.get(), request_.data() + sent_, 1) == 1) {
      ++sent_;
    } else {
      finish();
    }
    ERR_clear_error();
  }

  // Reads what the server sent (its 408) when there is something; finished once closed.
  void readIfReady() {
    pollfd p{fd_, POLLIN, 0};
    if (finished_ || (SSL_pending(ssl_.get()) == 0 && ::poll(&p, 1, 0) <= 0)) {
      return;
    }
    char buf[1024];
    int n = SSL_read(ssl_.get(), buf, sizeof(buf));
    ERR_clear_error();
    if (n > 0) {
      answer_.append(buf, static_cast<size_t>(n));
    } else {
      finish();
    }
  }

 private:
  void finish() {
    finished_ = true;
    end_ = Clock::now();
  }

  int fd_;
  std::string request_;
  std::unique_ptr<SSL, SslFree> ssl_;
  bool connected_ = false;
  bool finished_ = false;
  size_t sent_ = 0;
  std::string answer_;
  Clock::time_point firstByte_{};
  Clock::time_point end_{};
};

double percentile(std::vector<double> samples, double p) {
  std::sort(samples.begin(), samples.end());
  auto rank = static_cast<size_t>(p * static_cast<double>(samples.size()) + 0.999999);
  return samples[std::clamp<size_t>(rank, 1, samples.size()) - 1];
}

}  // namespace

// What the test proves, and why these addresses. The API server stands at 127.0.0.1 (the
// HTTPS client of WebhookProcess). The slow clients stand at 127.0.0.2: 50 connections of
// one peer, fewer than the webhook's default limit of 64 per peer, so all 50 are let in and
// trickle at once, more than the webhook's 16 workers and 64 queue places would have taken
// one by one. Were they more than the limit, most would be closed at once and the test
// would prove nothing about the deadline. The limit itself is proven by a third peer,
// 127.0.0.3, whose 65th and later connections are closed at once, while the API server,
// another peer, is still served.
TEST_CASE("slow_client: 50 connections trickling a byte a second leave reviews under 100 ms",
          "[webhook-binary][slow_client]") {
  constexpr int kSlowClients = 50;
  constexpr int kPeerLimit = 64;  // HttpServerOptions::maxConnectionsPerPeer's default
  constexpr int kOverLimit = 6;
  TempDir dir;
  TlsFiles tls(dir);
  WebhookProcess webhook({"--static-backends", "127.0.0.1:9999", "--tls-cert-file", tls.certFile,
                          "--tls-key-file", tls.keyFile});
  REQUIRE(eventually([&] {
    return gvirtus::testing::httpGet(webhook.healthPort(), "/readyz").starts_with("ok");
  }));
  auto apiServer = webhook.client(tls.caFile);
  const std::string review = admissionReview(gvirtusPod()).dump();

  std::unique_ptr<SSL_CTX, SslCtxFree> ctx(SSL_CTX_new(TLS_client_method()));
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  const std::string slowRequest =
      "POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(review.size()) + "\r\n\r\n" + review;
  std::vector<std::unique_ptr<SlowClient>> slow;
  for (int i = 0; i < kSlowClients; ++i) {
    slow.push_back(
        std::make_unique<SlowClient>(ctx.get(), "127.0.0.2", webhook.port(), slowRequest));
    REQUIRE(slow.back()->connected());
  }
  // One byte from each, then one a second; the wait between bytes is the trickle itself,
  // and a poll that also sees the server's answers as they come.
  auto nextRound = Clock::now();
  auto trickle = [&] {
    if (Clock::now() < nextRound) {
      return;
    }
    for (auto& client : slow) {
      client->sendByte();
    }
    nextRound += 1s;
  };
  auto pollSlow = [&](Clock::duration most) {
    std::vector<pollfd> fds;
    for (auto& client : slow) {
      if (!client->finished()) {
        fds.push_back({client->fd(), POLLIN, 0});
      }
    }
    auto wait = std::min<Clock::duration>(
        most, std::max<Clock::duration>(nextRound - Clock::now(), Clock::duration{}));
    ::poll(fds.data(), fds.size(),
           static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(wait).count()));
    for (auto& client : slow) {
      client->readIfReady();
    }
  };
  trickle();

  // The API server's reviews, one after another on a kept-alive connection, for 3 s of
  // trickling; then the same with a peer at its connection limit.
  std::vector<double> latencies;
  auto reviews = [&](Clock::duration during) {
    const auto end = Clock::now() + during;
    int i = 0;
    while (Clock::now() < end) {
      trickle();
      auto begin = Clock::now();
      auto response = apiServer->Post(
          "/mutate", admissionReview(gvirtusPod(), "uid-" + std::to_string(i++)).dump(),
          "application/json");
      latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - begin).count());
      REQUIRE(response);
      REQUIRE(response->status == 200);
      pollSlow(0s);
    }
  };
  reviews(3s);
  for (auto& client : slow) {
    CHECK_FALSE(client->finished());  // all still trickling: none refused, none done
  }

  std::vector<int> flood;
  for (int i = 0; i < kPeerLimit + kOverLimit; ++i) {
    int fd = connectFrom("127.0.0.3", webhook.port());
    REQUIRE(fd >= 0);
    flood.push_back(fd);
  }
  auto floodClosed = [&] { return std::count_if(flood.begin(), flood.end(), closedByServer); };
  // The server decides at accept: the connections past the limit are closed at once, long
  // before any deadline (the TLS handshake's is 5 s) could close the others.
  CHECK(eventually([&] { return floodClosed() >= kOverLimit; }, 3s));
  CHECK(floodClosed() == kOverLimit);
  reviews(2s);
  for (int fd : flood) {
    ::close(fd);
  }

  // The request deadline (10 s from the first byte) closes every slow client with a 408.
  const auto giveUp = Clock::now() + 30s;
  while (Clock::now() < giveUp &&
         !std::all_of(slow.begin(), slow.end(), [](auto& c) { return c->finished(); })) {
    trickle();
    pollSlow(1s);
  }
  int timedOut = 0;
  double longest = 0;
  for (auto& client : slow) {
    REQUIRE(client->finished());
    timedOut += client->answer().starts_with("HTTP/1.1 408 ");
    longest = std::max(longest,
                       std::chrono::duration<double>(client->end() - client->firstByte()).count());
  }
  CHECK(timedOut == kSlowClients);
  CHECK(longest < 15);

  const double p50 = percentile(latencies, 0.50);
  const double p99 = percentile(latencies, 0.99);
  std::printf(
      "slow_client: %zu reviews beside %d trickling connections: p50 %.2f ms, p99 %.2f ms, max "
      "%.2f ms; %d answered 408, the last %.1f s after its first byte\n",
      latencies.size(), kSlowClients, p50, p99,
      *std::max_element(latencies.begin(), latencies.end()), timedOut, longest);
  CHECK(p99 < 100);

  webhook.child().kill(SIGTERM);
  CHECK(webhook.child().wait(std::chrono::seconds(10)) == 0);
}
