#pragma once

// The one question the peer guard (libgvirtus-peer-guard.so, preloaded into gvirtus-backend)
// asks the shim's PeerGate, and the environment that tells the guard where to ask. Shared
// by both sides; plain constants only, because the guard is built without the C++ library.
//
// The guard connects to the unix stream socket named by kSocketEnv once per accepted TCP
// connection and sends kRequestSize bytes: kMagic, then the peer's address as 16 bytes of
// IPv6 in network order (an IPv4 peer as ::ffff:a.b.c.d). The gate answers with one byte,
// kAllowed or kRefused, and closes. Anything else (no answer within the guard's timeout, a
// refused connection, another byte) counts as refused: the guard fails closed.

#include <stdint.h>

namespace gvirtus::peer_guard {

// The unix socket of the shim's gate. Set with kPortEnv; without it every question is refused.
inline constexpr char kSocketEnv[] = "GVIRTUS_PEER_GUARD_SOCKET";
// The TCP port whose accepted connections are checked; unset: the guard does nothing.
inline constexpr char kPortEnv[] = "GVIRTUS_PEER_GUARD_PORT";
// Milliseconds the guard waits for an answer before it refuses (default kDefaultTimeoutMs).
inline constexpr char kTimeoutEnv[] = "GVIRTUS_PEER_GUARD_TIMEOUT_MS";
inline constexpr int kDefaultTimeoutMs = 5000;

inline constexpr uint8_t kMagic[4] = {'G', 'P', 'G', '1'};
inline constexpr int kAddressOffset = 4;
inline constexpr int kRequestSize = 20;

inline constexpr uint8_t kAllowed = 'A';
inline constexpr uint8_t kRefused = 'R';

}  // namespace gvirtus::peer_guard
