#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace gvirtus::test {

// A DNS server for tests: UDP on 127.0.0.1, port 0, answering from a fixed zone.
// A name in the zone gets its A or AAAA records (possibly none: NOERROR without
// answers); a name marked `drop` gets no reply at all; any other name gets NXDOMAIN.
class TestDnsServer {
 public:
  struct Records {
    std::vector<std::string> a;
    std::vector<std::string> aaaa;
    bool drop = false;
  };

  // Zone keys are lower-case names without the trailing dot.
  explicit TestDnsServer(std::map<std::string, Records> zone) : zone_(std::move(zone)) {
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
      throw std::system_error(errno, std::generic_category(), "socket");
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = 0;
    ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
      const int error = errno;
      ::close(fd_);
      throw std::system_error(error, std::generic_category(), "bind");
    }
    socklen_t length = sizeof(address);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::jthread([this](std::stop_token stop) { serve(stop); });
  }

  ~TestDnsServer() {
    thread_.request_stop();
    thread_.join();
    ::close(fd_);
  }

  TestDnsServer(const TestDnsServer&) = delete;
  TestDnsServer& operator=(const TestDnsServer&) = delete;

  uint16_t port() const { return port_; }
  // "127.0.0.1:PORT", as Ipv4ResolverOptions::servers takes it.
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // How many queries arrived so far.
  int queries() const { return queries_.load(); }

 private:
  static constexpr uint16_t kTypeA = 1;
  static constexpr uint16_t kTypeAaaa = 28;
  static constexpr uint16_t kRcodeFormErr = 1;
  static constexpr uint16_t kRcodeNxDomain = 3;

  static uint16_t read16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
  static void put16(std::vector<uint8_t>& out, uint16_t value) {
    out.push_back(static_cast<uint8_t>(value >> 8));
    out.push_back(static_cast<uint8_t>(value & 0xff));
  }

  void serve(std::stop_token stop) {
    std::array<uint8_t, 1500> buffer{};
    while (!stop.stop_requested()) {
      pollfd fd{fd_, POLLIN, 0};
      if (::poll(&fd, 1, 20) <= 0) {
        continue;
      }
      sockaddr_in peer{};
      socklen_t peerLength = sizeof(peer);
      const ssize_t n = ::recvfrom(fd_, buffer.data(), buffer.size(), 0,
                                   reinterpret_cast<sockaddr*>(&peer), &peerLength);
      if (n < 12) {
        continue;
      }
      ++queries_;
      std::vector<uint8_t> reply = answer(buffer.data(), static_cast<size_t>(n));
      if (reply.empty()) {
        continue;
      }
      ::sendto(fd_, reply.data(), reply.size(), 0, reinterpret_cast<const sockaddr*>(&peer),
               peerLength);
    }
  }

  // The reply to one query; empty for no reply.
  std::vector<uint8_t> answer(const uint8_t* query, size_t size) {
    const uint16_t flags = read16(query + 2);
    if ((flags & 0x8000) != 0) {
      return {};  // a response, not a query
    }
    // The question: labels up to the root, then type and class.
    size_t offset = 12;
    std::string name;
    bool valid = read16(query + 4) == 1;
    while (valid) {
      if (offset >= size) {
        valid = false;
        break;
      }
      const uint8_t length = query[offset++];
      if (length == 0) {
        break;
      }
      if (length > 63 || offset + length > size) {
        valid = false;
        break;
      }
      if (!name.empty()) {
        name += '.';
      }
      for (size_t i = 0; i < length; ++i) {
        name += static_cast<char>(std::tolower(query[offset + i]));
      }
      offset += length;
    }
    if (valid && offset + 4 > size) {
      valid = false;
    }
    const uint16_t type = valid ? read16(query + offset) : 0;
    const size_t questionEnd = valid ? offset + 4 : 12;

    uint16_t rcode = 0;
    const std::vector<std::string>* records = nullptr;
    if (!valid) {
      rcode = kRcodeFormErr;
    } else if (auto it = zone_.find(name); it == zone_.end()) {
      rcode = kRcodeNxDomain;
    } else if (it->second.drop) {
      return {};
    } else if (type == kTypeA) {
      records = &it->second.a;
    } else if (type == kTypeAaaa) {
      records = &it->second.aaaa;
    }

    std::vector<uint8_t> out;
    out.push_back(query[0]);
    out.push_back(query[1]);
    // QR, the query's opcode and RD, AA, RA, rcode.
    put16(out, static_cast<uint16_t>(0x8000 | (flags & 0x7900) | 0x0400 | 0x0080 | rcode));
    put16(out, valid ? 1 : 0);
    put16(out, static_cast<uint16_t>(records != nullptr ? records->size() : 0));
    put16(out, 0);
    put16(out, 0);
    out.insert(out.end(), query + 12, query + questionEnd);
    if (records == nullptr) {
      return out;
    }
    for (const auto& text : *records) {
      put16(out, 0xc00c);  // the name: a pointer to the question's
      put16(out, type);
      put16(out, 1);  // class IN
      put16(out, 0);
      put16(out, 60);  // TTL
      if (type == kTypeA) {
        in_addr address{};
        ::inet_pton(AF_INET, text.c_str(), &address);
        put16(out, 4);
        const auto* bytes = reinterpret_cast<const uint8_t*>(&address);
        out.insert(out.end(), bytes, bytes + 4);
      } else {
        in6_addr address{};
        ::inet_pton(AF_INET6, text.c_str(), &address);
        put16(out, 16);
        const auto* bytes = reinterpret_cast<const uint8_t*>(&address);
        out.insert(out.end(), bytes, bytes + 16);
      }
    }
    return out;
  }

  std::map<std::string, Records> zone_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> queries_{0};
  std::jthread thread_;
};

}  // namespace gvirtus::test
