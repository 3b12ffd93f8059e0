#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>

#include "common/base/error.h"
#include "common/base/unique_fd.h"

// TCP sockets for our listeners: addresses, listening sockets, waits with a deadline.
namespace gvirtus {

// Splits "HOST:PORT", ":PORT" or "[V6]:PORT"; the host is empty for ":PORT".
Result<std::pair<std::string, int>> parseListenAddress(std::string_view address);

// A listening TCP socket (close-on-exec, SO_REUSEADDR, TCP_NODELAY inherited by accepted
// sockets, backlog 512). An empty `host` is every interface: IPv6 with IPv4 mapped, or
// IPv4 alone where the kernel has no IPv6. A host name is resolved; its first address that
// binds is used. Port 0 picks a free port (see boundPort).
Result<UniqueFd> openListener(const std::string& host, int port);

// The local port of a bound socket; 0 when it cannot be read.
int boundPort(int fd);

// The peer of a connected socket: its address ("10.0.0.1", "::1"; an IPv4-mapped IPv6
// address shown as IPv4) and port; empty and 0 when it cannot be read.
std::pair<std::string, int> peerAddress(int fd);

// Waits until `fd` is ready for `events` (poll(2) flags) or `deadline` passes; true when
// ready or in error (the next read or write reports which).
bool waitForFd(int fd, short events, std::chrono::steady_clock::time_point deadline);

// strerror for errno values, thread-safe.
std::string errnoText(int err);

}  // namespace gvirtus
