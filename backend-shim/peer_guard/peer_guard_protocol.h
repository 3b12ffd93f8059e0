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

// Per-pod sessions (the shim's --sessions=per-pod): the shim owns the port and hands each
// accepted connection to the one process that serves its pod. That process gets the guard
// with kHandoffFdEnv naming an inherited unix SOCK_SEQPACKET socket and kHandoffPortEnv the
// port its configuration names. The guard then binds that port on the loopback address with
// port 0 instead (the shim holds the real one; nothing of the process is reachable from the
// network), and answers every accept from the handoff socket: each message the shim sends
// there is one byte, kSession, with the accepted connection as SCM_RIGHTS. Before its first
// accept waits, the guard sends kReadySize bytes: kReady and its pid (int32, host order),
// the pid of the process that accepts (GVirtuS's forked child), which the shim watches.
//
// Before the pod's first connection, the shim may send the pod's limits: kLimitsSize bytes,
// kLimits and the pod's share of GPU memory in bytes (uint64, host order; 0: none), which the
// guard's allocation calls enforce from then on (gpu_memory_cap.h).
inline constexpr char kHandoffFdEnv[] = "GVIRTUS_SESSION_HANDOFF_FD";
inline constexpr char kHandoffPortEnv[] = "GVIRTUS_SESSION_PORT";
inline constexpr uint8_t kSession = 'S';
inline constexpr uint8_t kReady = 'R';
inline constexpr int kReadySize = 5;
inline constexpr uint8_t kLimits = 'L';
inline constexpr int kLimitsSize = 9;

// A directory the backend must not read (the shim's ServiceAccount token: the backend parses
// tenants' bytes). Before the program's main, the guard fences it off with Landlock
// (path_fence.cpp): the process and every process it starts may read anything else, and
// nothing beneath it. Unset or empty: no fence.
inline constexpr char kHiddenPathEnv[] = "GVIRTUS_HIDDEN_PATH";

}  // namespace gvirtus::peer_guard
