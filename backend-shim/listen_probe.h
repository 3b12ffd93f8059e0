#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

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

  bool operator==(const PortState&) const = default;
};

// Parses the text of /proc/net/tcp or /proc/net/tcp6 (header line, then one socket per
// line: "sl local_address rem_address st ...", addresses as HEX_IP:HEX_PORT) and adds what
// it says about `port` to `state`. Lines that do not parse are skipped.
void addProcNetTcp(std::string_view text, uint16_t port, PortState& state);

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
