// A listener for the peer guard's tests and benchmark, run with libgvirtus-peer-guard.so
// preloaded (or not). It listens on each TCP port given (0.0.0.0, or [::] with IPv4 mapped
// with --ipv6) and on --unix PATH, accepts with libc's accept() (accept4() with
// --nonblocking, on non-blocking listeners) and serves each connection:
//   echo        every byte back (the default)
//   --gvirtus   GVirtuS-shaped replies: per request (u64 name length, name, u64 input
//               length, input; host byte order, as GVirtuS sends size_t) a 4-byte status 0,
//               u64 output length, and that many bytes (the first 16 of the input, or fewer)
// It prints "listening PORT" per TCP listener then "ready", and for the tests' facts
// "accepted PORT PEER" per connection and "would block PORT" when a non-blocking accept
// found none (a refused connection, with the guard); --quiet leaves the facts out.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Args {
  bool nonBlocking = false;
  bool ipv6 = false;
  bool gvirtus = false;
  bool quiet = false;
  std::string unixPath;
  std::vector<int> ports;
};

struct Listener {
  int fd = -1;
  int port = 0;  // 0: the unix listener
};

struct Connection {
  int fd = -1;
  std::string pending;  // --gvirtus: bytes of a request not complete yet
};

int listenTcp(int port, const Args& args) {
  const int fd = ::socket(args.ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  // As GVirtuS asks for SO_REUSEADDR: a bool, which Linux refuses unless the guard widens it.
  const bool reuse = true;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse));
  int bound = -1;
  if (args.ipv6) {
    const int zero = 0;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_port = htons(static_cast<uint16_t>(port));
    address.sin6_addr = in6addr_any;
    bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  }
  if (bound != 0 || ::listen(fd, 512) != 0) {
    std::fprintf(stderr, "echo server: cannot listen on %d: %s\n", port, std::strerror(errno));
    std::exit(1);
  }
  return fd;
}

int listenUnix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(fd, 16) != 0) {
    std::fprintf(stderr, "echo server: cannot listen on %s: %s\n", path.c_str(),
                 std::strerror(errno));
    std::exit(1);
  }
  return fd;
}

std::string peerText(const sockaddr_storage& peer) {
  char text[INET6_ADDRSTRLEN] = "unix";
  if (peer.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(peer).sin_addr, text, sizeof(text));
  } else if (peer.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr, text,
                sizeof(text));
  }
  return text;
}

bool writeAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n <= 0) {
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// --gvirtus: answers every complete request in `pending`.
bool answerRequests(Connection& connection) {
  std::string& in = connection.pending;
  size_t at = 0;
  for (;;) {
    uint64_t nameLength = 0;
    uint64_t inputLength = 0;
    if (in.size() - at < sizeof(nameLength)) {
      break;
    }
    std::memcpy(&nameLength, in.data() + at, sizeof(nameLength));
    const size_t inputAt = at + sizeof(nameLength) + nameLength;
    if (in.size() < inputAt + sizeof(inputLength)) {
      break;
    }
    std::memcpy(&inputLength, in.data() + inputAt, sizeof(inputLength));
    const size_t end = inputAt + sizeof(inputLength) + inputLength;
    if (in.size() < end) {
      break;
    }
    const uint64_t outputLength = inputLength < 16 ? inputLength : 16;
    char reply[4 + sizeof(uint64_t) + 16];
    const int32_t status = 0;
    std::memcpy(reply, &status, 4);
    std::memcpy(reply + 4, &outputLength, sizeof(outputLength));
    std::memcpy(reply + 4 + sizeof(outputLength), in.data() + inputAt + sizeof(inputLength),
                outputLength);
    if (!writeAll(connection.fd, reply, 4 + sizeof(outputLength) + outputLength)) {
      return false;
    }
    at = end;
  }
  in.erase(0, at);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--nonblocking") {
      args.nonBlocking = true;
    } else if (arg == "--ipv6") {
      args.ipv6 = true;
    } else if (arg == "--gvirtus") {
      args.gvirtus = true;
    } else if (arg == "--quiet") {
      args.quiet = true;
    } else if (arg == "--unix" && i + 1 < argc) {
      args.unixPath = argv[++i];
    } else {
      args.ports.push_back(std::atoi(arg.c_str()));
    }
  }
  std::vector<Listener> listeners;
  for (const int port : args.ports) {
    listeners.push_back({listenTcp(port, args), port});
    std::printf("listening %d\n", port);
  }
  if (!args.unixPath.empty()) {
    listeners.push_back({listenUnix(args.unixPath), 0});
  }
  for (const auto& listener : listeners) {
    if (args.nonBlocking) {
      ::fcntl(listener.fd, F_SETFL, ::fcntl(listener.fd, F_GETFL) | O_NONBLOCK);
    }
  }
  std::printf("ready\n");
  std::fflush(stdout);

  std::vector<Connection> connections;
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    for (const auto& listener : listeners) {
      fds.push_back({listener.fd, POLLIN, 0});
    }
    for (const auto& connection : connections) {
      fds.push_back({connection.fd, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      continue;
    }
    for (size_t i = connections.size(); i-- > 0;) {
      if (fds[listeners.size() + i].revents == 0) {
        continue;
      }
      Connection& connection = connections[i];
      char buffer[65536];
      const ssize_t n = ::read(connection.fd, buffer, sizeof(buffer));
      bool keep = n > 0;
      if (keep && args.gvirtus) {
        connection.pending.append(buffer, static_cast<size_t>(n));
        keep = answerRequests(connection);
      } else if (keep) {
        keep = writeAll(connection.fd, buffer, static_cast<size_t>(n));
      }
      if (!keep) {
        ::close(connection.fd);
        connections.erase(connections.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    for (size_t i = 0; i < listeners.size(); ++i) {
      if (fds[i].revents == 0) {
        continue;
      }
      sockaddr_storage peer{};
      socklen_t length = sizeof(peer);
      auto* address = reinterpret_cast<sockaddr*>(&peer);
      const int fd = args.nonBlocking ? ::accept4(listeners[i].fd, address, &length, SOCK_CLOEXEC)
                                      : ::accept(listeners[i].fd, address, &length);
      if (fd < 0) {
        if ((errno == EAGAIN || errno == EWOULDBLOCK) && !args.quiet) {
          std::printf("would block %d\n", listeners[i].port);
          std::fflush(stdout);
        }
        continue;
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      connections.push_back({fd, {}});
      if (args.quiet) {
        continue;
      }
      std::printf("accepted %d %s\n", listeners[i].port, peerText(peer).c_str());
      std::fflush(stdout);
    }
  }
}
