// libgvirtus-peer-guard.so: preloaded into gvirtus-backend by the shim (with --peer-check
// told where its gate is; without it, only reuse_address.cpp and stdout_line_buffering.cpp act
// and accept passes straight on), it stands in for libc's accept() and accept4(). A connection
// accepted on the guarded port whose peer the shim's gate does not allow is closed before the
// backend sees it, so that no byte of it reaches GVirtuS, which has no authentication of its own.
//
// It runs inside a program we do not build, on whatever C library that image has (Ubuntu
// 22.04's glibc 2.35 for GVirtuS): it uses the C library alone, at symbol versions no newer
// than GLIBC_2.17, no C++ library, no allocation and no lock (tests/backend-shim check the
// ELF). The accept itself is the raw system call, not libc's through dlsym, which would
// need libdl's versioned symbols and gains nothing; glibc's accept is that system call too
// (without pthread cancellation, which GVirtuS does not use).
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend-shim/peer_guard/gate_question.h"
#include "backend-shim/peer_guard/guard_settings.h"
#include "backend-shim/peer_guard/session_handoff.h"

namespace gvirtus::peer_guard {
namespace {

int rawAccept(int listener, sockaddr* address, socklen_t* length, int flags) {
  return static_cast<int>(syscall(SYS_accept4, listener, address, length, flags));
}

// The peer as 16 bytes of IPv6, an IPv4 peer mapped (::ffff:a.b.c.d); false for a peer
// that is not IP (a unix socket's).
bool ipAddress(const sockaddr_storage& peer, uint8_t (&out)[16]) {
  if (peer.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(peer);
    const auto* bytes = reinterpret_cast<const uint8_t*>(&v4.sin_addr);
    for (int i = 0; i < 10; ++i) {
      out[i] = 0;
    }
    out[10] = 0xff;
    out[11] = 0xff;
    for (int i = 0; i < 4; ++i) {
      out[12 + i] = bytes[i];
    }
    return true;
  }
  if (peer.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(peer);
    const auto* bytes = reinterpret_cast<const uint8_t*>(&v6.sin6_addr);
    for (int i = 0; i < 16; ++i) {
      out[i] = bytes[i];
    }
    return true;
  }
  return false;
}

// Whether connections on `listener` are the guarded port's. A listener whose address
// cannot be read is checked: the guard fails closed.
bool guardedListener(int listener, const Settings& settings) {
  if (settings.everyPort) {
    return true;
  }
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  if (::getsockname(listener, reinterpret_cast<sockaddr*>(&local), &length) != 0) {
    return true;
  }
  uint16_t port = 0;
  if (local.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<const sockaddr_in&>(local).sin_port);
  } else if (local.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<const sockaddr_in6&>(local).sin6_port);
  }
  return port == settings.port;
}

bool nonBlocking(int listener) {
  // The system call, not fcntl(): glibc 2.28 and later may bind that name to fcntl64.
  const long flags = syscall(SYS_fcntl, listener, F_GETFL);
  return flags >= 0 && (flags & O_NONBLOCK) != 0;
}

// What accept(2) does with the caller's buffer: as much of the address as fits, and its
// whole length.
void copyPeer(const sockaddr_storage& peer, socklen_t peerLength, sockaddr* address,
              socklen_t* length) {
  if (address == nullptr || length == nullptr) {
    return;
  }
  const socklen_t fits = *length < peerLength ? *length : peerLength;
  const auto* from = reinterpret_cast<const uint8_t*>(&peer);
  auto* to = reinterpret_cast<uint8_t*>(address);
  for (socklen_t i = 0; i < fits; ++i) {
    to[i] = from[i];
  }
  *length = peerLength;
}

int guardedAccept(int listener, sockaddr* address, socklen_t* length, int flags) {
  // A per-pod session process: the shim accepted and checked the connection already.
  if (handoffMode()) {
    return acceptHandedOver(listener, address, length, flags);
  }
  Settings scratch;
  const Settings& settings = loadedSettings(scratch);
  if (!settings.enabled) {
    return rawAccept(listener, address, length, flags);
  }
  for (;;) {
    sockaddr_storage peer{};
    socklen_t peerLength = sizeof(peer);
    const int connection =
        rawAccept(listener, reinterpret_cast<sockaddr*>(&peer), &peerLength, flags);
    if (connection < 0) {
      return connection;
    }
    const int saved = errno;
    uint8_t ip[16];
    if (!ipAddress(peer, ip) || !guardedListener(listener, settings) || gateAllows(settings, ip)) {
      copyPeer(peer, peerLength, address, length);
      errno = saved;
      return connection;
    }
    ::close(connection);
    // A blocking listener's caller waits for a connection, so it gets the next one; an
    // event loop's is told there is none now, as if the refused one had never come.
    if (nonBlocking(listener)) {
      errno = EAGAIN;
      return -1;
    }
  }
}

}  // namespace
}  // namespace gvirtus::peer_guard

extern "C" [[gnu::visibility("default")]] int accept(int listener, sockaddr* address,
                                                     socklen_t* length) {
  return gvirtus::peer_guard::guardedAccept(listener, address, length, 0);
}

extern "C" [[gnu::visibility("default")]] int accept4(int listener, sockaddr* address,
                                                      socklen_t* length, int flags) {
  return gvirtus::peer_guard::guardedAccept(listener, address, length, flags);
}
