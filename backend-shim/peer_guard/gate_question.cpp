#include "backend-shim/peer_guard/gate_question.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "backend-shim/peer_guard/guard_report.h"

namespace gvirtus::peer_guard {
namespace {

long long monotonicMs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<long long>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
}

// The socket to the gate, closed on every way out.
class Connection {
 public:
  Connection() : fd_(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {}
  ~Connection() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// poll(2) gives up early on a signal whatever SA_RESTART says; the backend's children end
// and send it SIGCHLD, which must not cost a client its session.
bool waitReadable(int fd, long long deadline) {
  for (;;) {
    const long long left = deadline - monotonicMs();
    if (left <= 0) {
      return false;
    }
    pollfd ready{fd, POLLIN, 0};
    const int count = ::poll(&ready, 1, static_cast<int>(left));
    if (count > 0) {
      return true;
    }
    if (count == 0 || errno != EINTR) {
      return false;
    }
  }
}

bool ask(const Settings& settings, const uint8_t (&address)[16]) {
  const long long deadline = monotonicMs() + settings.timeoutMs;
  Connection gate;
  if (gate.fd() < 0) {
    reportThrottled("cannot open a socket to the shim's gate; refusing connections", errno);
    return false;
  }
  // A unix connect waits while the gate's backlog is full; this bounds that wait too.
  const timeval limit{settings.timeoutMs / 1000, (settings.timeoutMs % 1000) * 1000};
  ::setsockopt(gate.fd(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  if (::connect(gate.fd(), reinterpret_cast<const sockaddr*>(&settings.gate),
                settings.gateLength) != 0) {
    reportThrottled("cannot reach the shim's gate; refusing connections", errno);
    return false;
  }
  uint8_t request[kRequestSize];
  for (int i = 0; i < kAddressOffset; ++i) {
    request[i] = kMagic[i];
  }
  for (int i = 0; i < 16; ++i) {
    request[kAddressOffset + i] = address[i];
  }
  if (::send(gate.fd(), request, sizeof(request), MSG_NOSIGNAL) != kRequestSize) {
    reportThrottled("cannot ask the shim's gate; refusing connections", errno);
    return false;
  }
  if (!waitReadable(gate.fd(), deadline)) {
    reportThrottled("no answer from the shim's gate in time; refusing connections", ETIMEDOUT);
    return false;
  }
  uint8_t answer = 0;
  return ::recv(gate.fd(), &answer, 1, 0) == 1 && answer == kAllowed;
}

}  // namespace

bool gateAllows(const Settings& settings, const uint8_t (&address)[16]) {
  if (!settings.gateKnown) {
    return false;
  }
  const int saved = errno;
  const bool allowed = ask(settings, address);
  errno = saved;
  return allowed;
}

}  // namespace gvirtus::peer_guard
