#pragma once

#include <stdint.h>
#include <sys/socket.h>

// The guard's side of per-pod sessions (peer_guard_protocol.h): the process takes its
// connections from the shim's handoff socket instead of its own listener.
namespace gvirtus::peer_guard {

// Whether the process was started with a handoff socket (kHandoffFdEnv); read once, by the
// library's constructor, before any thread.
bool handoffMode();
// The port whose bind is moved to the loopback address (kHandoffPortEnv); 0: none.
uint16_t handoffPort();

// accept(2) answered from the handoff socket: the next connection the shim hands over,
// with the peer's address. Blocks unless the listener is non-blocking (then EAGAIN when
// none waits). SOCK_CLOEXEC and SOCK_NONBLOCK in `flags` apply to the connection. When the
// shim's end is gone the process has nothing left to serve and exits.
int acceptHandedOver(int listener, sockaddr* address, socklen_t* length, int flags);

}  // namespace gvirtus::peer_guard
