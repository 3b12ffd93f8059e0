#include "support/cluster_env.h"
#include <charconv>

#include <netinet/in.h>
#include <sys/socket.h>

#include <arpa/inet.h>

#include <fstream>
#include <random>
#include <sstream>

namespace gvirtus::testing {

namespace {

// Whether nothing holds `port` on any address now: a bind without SO_REUSEADDR succeeds.
bool portFree(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return bound;
}

}  // namespace

int freePort() {
  // Below the kernel's range of ports for connecting clients: a port from bind(0) is one a
  // client of a test running beside this one may be given as its own, and the TIME_WAIT it
  // leaves when it closes keeps a backend from binding that port for a minute.
  int clientsFrom = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> clientsFrom;
  constexpr int kFirst = 10000;
  static std::mt19937 random(std::random_device{}());
  if (clientsFrom - kFirst >= 1000) {
    std::uniform_int_distribution<int> pick(kFirst, clientsFrom - 1);
    for (int attempt = 0; attempt < 200; ++attempt) {
      if (const int port = pick(random); portFree(port)) {
        return port;
      }
    }
  }
  // No room below the range: one the kernel picks.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

HttpReply httpFetch(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return {};
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n = 0;
      while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) {
        response.append(buf, static_cast<size_t>(n));
      }
    }
  }
  ::close(fd);
  HttpReply reply;
  if (response.rfind("HTTP/1.", 0) == 0 && response.size() >= 12) {
    std::from_chars(response.data() + 9, response.data() + 12, reply.status);
  }
  const auto body = response.find("\r\n\r\n");
  if (body != std::string::npos) {
    reply.body = response.substr(body + 4);
  }
  return reply;
}

std::string httpGet(int port, const std::string& path) {
  return httpFetch(port, path).body;
}

double metricValue(const std::string& metricsText, const std::string& sample) {
  std::istringstream lines(metricsText);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(sample + " ", 0) == 0) {
      return std::stod(line.substr(sample.size() + 1));
    }
  }
  return -1;
}

}  // namespace gvirtus::testing
