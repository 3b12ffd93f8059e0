#pragma once

// Helpers of the backend shim's tests: temporary folders, real TCP clients on 127.0.0.1, a
// port held without listening, the fake backend's command line and start markers, and /proc
// inspection (zombies, live pids).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backend-shim/backend/config.h"
#include "backend-shim/backend/proc_file.h"
#include "support/temp_dir.h"

namespace gvirtus::backend_shim::test {

inline const std::string kFakeBackend = FAKE_GVIRTUS_BACKEND;
inline const std::string kShimBinary = GVIRTUS_BACKEND_SHIM;

using gvirtus::testing::TempDir;

// A connected TCP client of 127.0.0.1:port, closed when it goes away.
class TcpClient {
 public:
  explicit TcpClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  }
  ~TcpClient() { close(); }
  TcpClient(const TcpClient&) = delete;
  TcpClient& operator=(const TcpClient&) = delete;
  void close() {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  // Closes with a reset (SO_LINGER 0), as a frontend whose host is gone never does, but
  // ending the server's side of the connection at once: what lingered on the port is gone.
  void reset() {
    if (fd_ >= 0) {
      const linger now{1, 0};
      ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &now, sizeof(now));
      close();
    }
  }
  // True when the server closed the connection (a read returns 0 or an error).
  bool closedByServer() const {
    char byte = 0;
    const ssize_t n = ::recv(fd_, &byte, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }

 private:
  int fd_ = -1;
};

// A socket bound to 0.0.0.0:port that never listens: the port cannot be bound without
// SO_REUSEADDR, as while old connections linger on it, until release().
class PortBlocker {
 public:
  explicit PortBlocker(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  }
  ~PortBlocker() { release(); }
  PortBlocker(const PortBlocker&) = delete;
  PortBlocker& operator=(const PortBlocker&) = delete;
  void release() {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

 private:
  int fd_ = -1;
};

// Writes the backend config for `port` into `dir` and returns its path.
inline std::string writeConfig(const TempDir& dir, int port) {
  const std::string path = dir.file("properties.json");
  REQUIRE(
      writeBackendConfig(path, renderBackendConfig(static_cast<uint16_t>(port), kDefaultPlugins))
          .has_value());
  return path;
}

struct Start {
  pid_t pid = 0;
  long long millis = 0;  // since the epoch
};

// The events ("start" or "exit") the fake backend recorded with --marker.
inline std::vector<Start> readMarker(const std::string& marker, const std::string& event) {
  std::vector<Start> events;
  std::ifstream in(marker);
  std::string word;
  Start start;
  while (in >> word >> start.pid >> start.millis) {
    if (word == event) {
      events.push_back(start);
    }
  }
  return events;
}

inline std::vector<Start> readStarts(const std::string& marker) {
  return readMarker(marker, "start");
}

// A process that exists and is not a zombie.
inline bool processAlive(pid_t pid) {
  const auto stat = readProcStat(pid);
  return stat && stat->state != 'Z' && stat->state != 'X';
}

// Children of `parent`: all of them, or only zombies.
inline std::vector<pid_t> childrenOf(pid_t parent, bool zombiesOnly) {
  std::vector<pid_t> found;
  for (const pid_t pid : listPids()) {
    const auto stat = readProcStat(pid);
    if (stat && stat->parent == parent && (!zombiesOnly || stat->state == 'Z')) {
      found.push_back(pid);
    }
  }
  return found;
}

// True while a live (not zombie) process belongs to process group `group`. Orphans' zombies
// wait for this machine's PID 1, which may be slow to reap them: they do not count.
inline bool groupAlive(pid_t group) {
  for (const pid_t pid : listPids()) {
    const auto stat = readProcStat(pid);
    if (stat && stat->group == group && stat->state != 'Z' && stat->state != 'X') {
      return true;
    }
  }
  return false;
}

// Ends the fake backend's listening child (its parent idles on, as GVirtuS's does): its
// connections are closed by the kernel, from the server's side, and linger on the port.
inline void killListeningChild(pid_t backend) {
  for (const pid_t child : childrenOf(backend, false)) {
    ::kill(child, SIGKILL);
  }
}

// Makes the test process the reaper of its descendants' orphans for its lifetime, as the
// shim is when it runs as PID 1.
class SubreaperScope {
 public:
  SubreaperScope() { REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0); }
  ~SubreaperScope() { ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); }
  SubreaperScope(const SubreaperScope&) = delete;
  SubreaperScope& operator=(const SubreaperScope&) = delete;
};

}  // namespace gvirtus::backend_shim::test
