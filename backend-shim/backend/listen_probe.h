#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/error.h"

// Readiness and connection counts of the backend's port, read from the kernel's socket
// tables. It never connects: a TCP connect used as a probe leaks a file descriptor in the
// GVirtuS backend.
namespace gvirtus::backend_shim {

struct PortState {
  // A socket is in LISTEN state on the port (any local address).
  bool listening = false;
  // Sockets in ESTABLISHED state whose local port is the port: the backend's clients.
  int established = 0;
  // Sockets in CLOSE_WAIT state on the port: clients that hung up and whose socket the
  // backend never closed. GVirtuS leaks one (and a file descriptor) per finished client.
  int closeWait = 0;
  // Sockets whose local port is the port, by the kernel's state number (1 ESTABLISHED ...
  // 6 TIME_WAIT ... 10 LISTEN; include/net/tcp_states.h): what holds the port when it cannot
  // be bound.
  std::array<int, 13> byState{};

  bool operator==(const PortState&) const = default;
};

// Parses the text of /proc/net/tcp or /proc/net/tcp6 (header line, then one socket per
// line: "sl local_address rem_address st ...", addresses as HEX_IP:HEX_PORT) and adds what
// it says about `port` to `state`. Lines that do not parse are skipped.
void addProcNetTcp(std::string_view text, uint16_t port, PortState& state);

// The sockets of `state` by state name, for a log line: "FIN_WAIT2=1 TIME_WAIT=2"; empty when
// none.
std::string describeSockets(const PortState& state);

class ListenProbe {
 public:
  // The tables to read; a missing one (tcp6 on a host without IPv6) is skipped, but at
  // least one must be readable.
  explicit ListenProbe(std::vector<std::string> paths = {"/proc/net/tcp", "/proc/net/tcp6"});

  Result<PortState> probe(uint16_t port) const;

 private:
  std::vector<std::string> paths_;
};

}  // namespace gvirtus::backend_shim
