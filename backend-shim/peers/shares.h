#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend-shim/peers/list.h"

// The GPU memory shares of this backend's peers: what the webhook lists in the backend pod's
// gvirtus.io/peer-memory annotation beside gvirtus.io/peers (docs/pod-contract.md). Each pod's
// session process is given its share as a cap (gpu_memory_cap.h in the guard).
namespace gvirtus::backend_shim {

inline constexpr std::string_view kPeerMemoryAnnotation = names::kPeerMemoryAnnotation;
// A share above this (1 PiB) is not one: the entry is malformed.
inline constexpr uint64_t kMaxShareMiB = 1ull << 30;

// Shares by address, sorted: a lookup is a binary search.
class PeerShares {
 public:
  PeerShares() = default;
  explicit PeerShares(std::vector<std::pair<Ipv4, uint64_t>> mebibytes);

  // The share of the pod at `address` in bytes; nullopt: it has none.
  std::optional<uint64_t> bytesOf(Ipv4 address) const;
  size_t size() const { return shares_.size(); }
  bool operator==(const PeerShares&) const = default;

 private:
  std::vector<std::pair<Ipv4, uint64_t>> shares_;  // MiB
};

struct ParsedShares {
  PeerShares shares;
  size_t malformed = 0;        // entries that are not ADDRESS=MiB, skipped
  std::string firstMalformed;  // the first of them (at most 64 bytes of it), for the log
};

// "10.244.1.5=4096,10.244.2.7=2048": entries ADDRESS=MiB (a whole number from 1 to
// kMaxShareMiB), comma-separated, spaces around them and empty ones ignored; at most `limit`
// entries are read. An address given twice keeps its smaller share.
ParsedShares parsePeerShares(std::string_view text, size_t limit = kMaxPeers);

}  // namespace gvirtus::backend_shim
