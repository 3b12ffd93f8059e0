// The accept and bind of a per-pod session process (session_handoff.h). The library's rules
// hold here (accept_guard.cpp): the C library alone, raw system calls, no allocation, no
// lock. The CMSG_FIRSTHDR and CMSG_DATA macros are plain arithmetic; CMSG_NXTHDR, a libc
// call, is not needed for the one descriptor a message carries.
#include "backend-shim/peer_guard/session_handoff.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend-shim/peer_guard/gpu_memory_cap.h"
#include "backend-shim/peer_guard/guard_report.h"
#include "backend-shim/peer_guard/guard_settings.h"
#include "backend-shim/peer_guard/peer_guard_protocol.h"

namespace gvirtus::peer_guard {
namespace {

int handoffFd = -1;
uint16_t boundPort = 0;
// Set by the first accept that announces the process (kReady); a second announcement from
// a race of two accepting threads is harmless, so no lock.
bool announced = false;

[[gnu::constructor]] void loadHandoff() {
  const char* fd = getenv(kHandoffFdEnv);
  if (fd == nullptr) {
    return;
  }
  handoffFd = static_cast<int>(parseVariableNumber(fd, 65535));
  if (handoffFd < 0) {
    report("GVIRTUS_SESSION_HANDOFF_FD is not a descriptor; the process exits", fd);
    syscall(SYS_exit_group, 2);
  }
  const long port = parseVariableNumber(getenv(kHandoffPortEnv), 65535);
  boundPort = port > 0 ? static_cast<uint16_t>(port) : 0;
}

void announce() {
  if (__atomic_exchange_n(&announced, true, __ATOMIC_ACQ_REL)) {
    return;
  }
  uint8_t message[kReadySize];
  message[0] = kReady;
  const int32_t pid = static_cast<int32_t>(syscall(SYS_getpid));
  const auto* bytes = reinterpret_cast<const uint8_t*>(&pid);
  for (int i = 0; i < 4; ++i) {
    message[1 + i] = bytes[i];
  }
  syscall(SYS_sendto, handoffFd, message, sizeof(message), MSG_NOSIGNAL, nullptr, 0);
}

}  // namespace

bool handoffMode() {
  return handoffFd >= 0;
}
uint16_t handoffPort() {
  return boundPort;
}

int acceptHandedOver(int listener, sockaddr* address, socklen_t* length, int flags) {
  announce();
  const long listenerFlags = syscall(SYS_fcntl, listener, F_GETFL);
  const bool nonBlocking = listenerFlags >= 0 && (listenerFlags & O_NONBLOCK) != 0;
  for (;;) {
    uint8_t received[kLimitsSize] = {};
    iovec part{received, sizeof(received)};
    alignas(cmsghdr) uint8_t control[CMSG_SPACE(sizeof(int))];
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    const int receiveFlags =
        ((flags & SOCK_CLOEXEC) != 0 ? MSG_CMSG_CLOEXEC : 0) | (nonBlocking ? MSG_DONTWAIT : 0);
    const long got = syscall(SYS_recvmsg, handoffFd, &message, receiveFlags);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return -1;
    }
    if (got <= 0) {
      // The shim is gone or ended this process's service: nothing will come again.
      syscall(SYS_exit_group, 0);
    }
    const uint8_t kind = received[0];
    if (kind == kLimits && got == kLimitsSize) {
      uint64_t bytes = 0;
      auto* to = reinterpret_cast<uint8_t*>(&bytes);
      for (int i = 0; i < 8; ++i) {
        to[i] = received[1 + i];
      }
      setMemoryCap(bytes);
      continue;
    }
    const cmsghdr* header = CMSG_FIRSTHDR(&message);
    if (kind != kSession || header == nullptr || header->cmsg_level != SOL_SOCKET ||
        header->cmsg_type != SCM_RIGHTS || header->cmsg_len != CMSG_LEN(sizeof(int))) {
      continue;  // not a connection: nothing to serve
    }
    int connection = -1;
    const auto* from = CMSG_DATA(header);
    auto* to = reinterpret_cast<uint8_t*>(&connection);
    for (unsigned i = 0; i < sizeof(int); ++i) {
      to[i] = from[i];
    }
    if ((flags & SOCK_NONBLOCK) != 0) {
      const long own = syscall(SYS_fcntl, connection, F_GETFL);
      syscall(SYS_fcntl, connection, F_SETFL, own | O_NONBLOCK);
    }
    if (address != nullptr && length != nullptr &&
        syscall(SYS_getpeername, connection, address, length) != 0) {
      *length = 0;
    }
    return connection;
  }
}

}  // namespace gvirtus::peer_guard

// The backend binds the port its configuration names; the shim holds that port, so the
// session process binds the loopback address with a port of the kernel's choice instead.
extern "C" [[gnu::visibility("default")]] int bind(int fd, const sockaddr* address,
                                                   socklen_t length) noexcept {
  using namespace gvirtus::peer_guard;
  if (handoffMode() && handoffPort() != 0 && address != nullptr) {
    if (address->sa_family == AF_INET && length >= sizeof(sockaddr_in) &&
        ntohs(reinterpret_cast<const sockaddr_in*>(address)->sin_port) == handoffPort()) {
      sockaddr_in loopback{};
      loopback.sin_family = AF_INET;
      loopback.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      return static_cast<int>(syscall(SYS_bind, fd, &loopback, sizeof(loopback)));
    }
    if (address->sa_family == AF_INET6 && length >= sizeof(sockaddr_in6) &&
        ntohs(reinterpret_cast<const sockaddr_in6*>(address)->sin6_port) == handoffPort()) {
      sockaddr_in6 loopback{};
      loopback.sin6_family = AF_INET6;
      loopback.sin6_addr.s6_addr[15] = 1;  // ::1
      return static_cast<int>(syscall(SYS_bind, fd, &loopback, sizeof(loopback)));
    }
  }
  return static_cast<int>(syscall(SYS_bind, fd, address, length));
}
