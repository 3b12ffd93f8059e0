#include "common/net/sockets.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <system_error>

namespace gvirtus {

namespace {

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

// Opens a listening socket; `socketErrno` tells why socket(2) failed (0 when it did not).
Result<UniqueFd> bindSocket(const sockaddr* addr, socklen_t len, bool dualStack,
                            const std::string& shown, int* socketErrno = nullptr) {
  UniqueFd fd(::socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) {
    if (socketErrno != nullptr) {
      *socketErrno = errno;
    }
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
  if (host.find(':') != std::string::npos) {
    return "[" + host + "]:" + std::to_string(port);
  }
  return host + ":" + std::to_string(port);
}

int pollMillis(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 24 * 3600 * 1000));
}

}  // namespace

bool waitForFd(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, pollMillis(deadline));
    if (n > 0) {
      return true;
    }
    if (n == 0) {
      return false;
    }
    if (errno != EINTR) {
      return false;
    }
  }
}

std::string errnoText(int err) {
  return std::system_category().message(err);
}

Result<std::pair<std::string, int>> parseListenAddress(std::string_view address) {
  auto bad = [&](const std::string& why) {
    return fail("listen address \"" + std::string(address) + "\": " + why);
  };
  std::string host;
  std::string_view portText;
  if (!address.empty() && address.front() == '[') {
    auto close = address.find(']');
    if (close == std::string_view::npos) {
      return bad("missing ']'");
    }
    host = std::string(address.substr(1, close - 1));
    if (host.empty()) {
      return bad("empty IPv6 host");
    }
    if (close + 1 >= address.size() || address[close + 1] != ':') {
      return bad("missing :PORT");
    }
    portText = address.substr(close + 2);
  } else {
    auto colon = address.rfind(':');
    if (colon == std::string_view::npos) {
      return bad("want HOST:PORT or :PORT");
    }
    host = std::string(address.substr(0, colon));
    if (host.find(':') != std::string::npos) {
      return bad("write an IPv6 host in brackets");
    }
    portText = address.substr(colon + 1);
  }
  int port = -1;
  auto [end, ec] = std::from_chars(portText.data(), portText.data() + portText.size(), port);
  if (portText.empty() || ec != std::errc() || end != portText.data() + portText.size() ||
      port < 0 || port > 65535) {
    return bad("port must be a number between 0 and 65535");
  }
  if (host == "*") {
    host.clear();
  }
  return std::make_pair(host, port);
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
    if (fd || socketErrno == 0) {
      return fd;
    }
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
  if (rc != 0) {
    return fail("listen on " + shown + ": resolve: " + ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, &::freeaddrinfo);
  Error last;
  last.message = "listen on " + shown + ": no usable address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    auto fd = bindSocket(ai->ai_addr, ai->ai_addrlen, false, shown);
    if (fd) {
      return fd;
    }
    last = fd.error();
  }
  return fail(last);
}

int boundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return 0;
  }
  int port = 0;
  formatAddress(addr, &port);
  return port;
}

std::pair<std::string, int> peerAddress(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return {std::string(), 0};
  }
  std::string shown = formatAddress(addr, &port);
  return {std::move(shown), port};
}

}  // namespace gvirtus
