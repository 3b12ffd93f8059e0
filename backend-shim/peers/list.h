#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/contract/labels.h"

// The pods allowed to open sessions on this backend: the IPv4 addresses the webhook lists in
// the backend pod's gvirtus.io/peers annotation (docs/pod-contract.md).
namespace gvirtus::backend_shim {

inline constexpr std::string_view kPeersAnnotation = names::kPeersAnnotation;
// More addresses than any node holds pods; the rest of a longer list is ignored.
inline constexpr size_t kMaxPeers = 65536;

// An IPv4 address in host byte order.
using Ipv4 = uint32_t;

// "10.244.1.5" (the strict dotted quad inet_pton takes), or nullopt.
std::optional<Ipv4> parseIpv4(std::string_view text);
std::string formatIpv4(Ipv4 address);

// A set of addresses, sorted: lookups are a binary search, and two lists compare equal when
// they hold the same addresses in whatever order they were written.
class PeerList {
 public:
  PeerList() = default;
  explicit PeerList(std::vector<Ipv4> addresses);

  bool contains(Ipv4 address) const;
  size_t size() const { return addresses_.size(); }
  bool operator==(const PeerList&) const = default;

 private:
  std::vector<Ipv4> addresses_;
};

// What an annotation's value holds.
struct ParsedPeers {
  PeerList peers;
  size_t malformed = 0;        // entries that are not an IPv4 address, skipped
  std::string firstMalformed;  // the first of them (at most 64 bytes of it), for the log
  bool truncated = false;      // more than `limit` addresses: the rest were ignored
};

// A comma-separated list of IPv4 addresses ("10.244.1.5,10.244.2.7"); spaces around the
// entries and empty entries are ignored, so "" is the empty list.
ParsedPeers parsePeers(std::string_view text, size_t limit = kMaxPeers);

}  // namespace gvirtus::backend_shim
