#include "backend-shim/peers/list.h"

#include <arpa/inet.h>

#include <algorithm>

#include "common/base/strings.h"

namespace gvirtus::backend_shim {
namespace {

constexpr size_t kLongestAddress = 15;  // "255.255.255.255"
constexpr size_t kMalformedShown = 64;

}  // namespace

std::optional<Ipv4> parseIpv4(std::string_view text) {
  if (text.empty() || text.size() > kLongestAddress) {
    return std::nullopt;
  }
  const std::string terminated(text);
  in_addr address{};
  if (::inet_pton(AF_INET, terminated.c_str(), &address) != 1) {
    return std::nullopt;
  }
  return ntohl(address.s_addr);
}

std::string formatIpv4(Ipv4 address) {
  in_addr network{htonl(address)};
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &network, text, sizeof(text));
  return text;
}

PeerList::PeerList(std::vector<Ipv4> addresses) : addresses_(std::move(addresses)) {
  std::sort(addresses_.begin(), addresses_.end());
  addresses_.erase(std::unique(addresses_.begin(), addresses_.end()), addresses_.end());
}

bool PeerList::contains(Ipv4 address) const {
  return std::binary_search(addresses_.begin(), addresses_.end(), address);
}

ParsedPeers parsePeers(std::string_view text, size_t limit) {
  ParsedPeers parsed;
  std::vector<Ipv4> addresses;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view entry = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (entry.empty()) {
      continue;
    }
    if (addresses.size() >= limit) {
      parsed.truncated = true;
      break;
    }
    if (auto address = parseIpv4(entry)) {
      addresses.push_back(*address);
    } else if (parsed.malformed++ == 0) {
      parsed.firstMalformed = std::string(entry.substr(0, kMalformedShown));
    }
  }
  parsed.peers = PeerList(std::move(addresses));
  return parsed;
}

}  // namespace gvirtus::backend_shim
