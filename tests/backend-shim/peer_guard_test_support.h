#pragma once

// Helpers of the peer check's tests: TCP clients from distinct loopback addresses (Linux
// routes all of 127.0.0.0/8 to lo, so each test peer has an address of its own), and the
// guard's question asked by hand.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "backend-shim/peer_guard/peer_guard_protocol.h"
#include "common/base/unique_fd.h"

namespace gvirtus::backend_shim::test {

inline const std::string kPeerGuardLibrary = PEER_GUARD_LIBRARY;
inline const std::string kEchoServer = PEER_GUARD_ECHO_SERVER;
// For a process the guard is preloaded into: in a GVIRTUS_SANITIZE build, ASan would stop a
// program whose first preloaded library is not its runtime (the guard is built without it).
inline const std::string kAsanPreloadOrder = "ASAN_OPTIONS=verify_asan_link_order=0";

// Connected to 127.0.0.1:port from `source`; closed when it goes away.
class LoopbackClient {
 public:
  LoopbackClient(int port, const std::string& source) {
    fd_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(fd_.valid());
    sockaddr_in from{};
    from.sin_family = AF_INET;
    REQUIRE(::inet_pton(AF_INET, source.c_str(), &from.sin_addr) == 1);
    REQUIRE(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&from), sizeof(from)) == 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0);
  }

  void send(const std::string& text) {
    REQUIRE(::send(fd_.get(), text.data(), text.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(text.size()));
  }

  // Reads until `size` bytes came in all, the server closed, or `timeout` passed; returns
  // everything received so far.
  const std::string& receive(size_t size, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (received_.size() < size && !closed_ && readOnce(deadline)) {
    }
    return received_;
  }

  // Waits up to `timeout` for the server to close the connection (a read of 0 or an error,
  // a reset); bytes that come first are kept in received().
  bool closedWithin(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!closed_ && readOnce(deadline)) {
    }
    return closed_;
  }

  const std::string& received() const { return received_; }

 private:
  // One read, after waiting for one until `deadline` (a past deadline: a look without a
  // wait); false when none came in time.
  bool readOnce(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                               deadline - std::chrono::steady_clock::now())
                                               .count());
    pollfd ready{fd_.get(), POLLIN, 0};
    if (::poll(&ready, 1, static_cast<int>(left)) <= 0) {
      return false;
    }
    char buffer[4096];
    const ssize_t n = ::recv(fd_.get(), buffer, sizeof(buffer), 0);
    if (n <= 0) {
      closed_ = true;
    } else {
      received_.append(buffer, static_cast<size_t>(n));
    }
    return true;
  }

  UniqueFd fd_;
  std::string received_;
  bool closed_ = false;
};

// The guard's question about `address` (IPv4 or IPv6 text) asked of the gate at
// `socketPath`, raw: the answer byte, or nullopt when the gate closed without one or gave
// none within `timeout`. `magic` false sends a wrong magic.
inline std::optional<uint8_t> askGate(const std::string& socketPath, const std::string& address,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(20),
                                      bool magic = true) {
  namespace protocol = gvirtus::peer_guard;
  uint8_t question[protocol::kRequestSize] = {};
  std::memcpy(question, protocol::kMagic, sizeof(protocol::kMagic));
  if (!magic) {
    question[0] = 'X';
  }
  in_addr v4{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    question[protocol::kAddressOffset + 10] = 0xff;
    question[protocol::kAddressOffset + 11] = 0xff;
    std::memcpy(question + protocol::kAddressOffset + 12, &v4, 4);
  } else {
    REQUIRE(::inet_pton(AF_INET6, address.c_str(), question + protocol::kAddressOffset) == 1);
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un gate{};
  gate.sun_family = AF_UNIX;
  std::snprintf(gate.sun_path, sizeof(gate.sun_path), "%s", socketPath.c_str());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&gate), sizeof(gate)) != 0 ||
      ::send(fd.get(), question, sizeof(question), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(sizeof(question))) {
    return std::nullopt;
  }
  pollfd ready{fd.get(), POLLIN, 0};
  uint8_t answer = 0;
  if (::poll(&ready, 1, static_cast<int>(timeout.count())) <= 0 ||
      ::recv(fd.get(), &answer, 1, 0) != 1) {
    return std::nullopt;
  }
  return answer;
}

}  // namespace gvirtus::backend_shim::test
