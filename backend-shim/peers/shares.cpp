#include "backend-shim/peers/shares.h"

#include <algorithm>
#include <charconv>

#include "common/base/strings.h"

namespace gvirtus::backend_shim {
namespace {

constexpr size_t kMalformedShown = 64;

std::optional<uint64_t> parseMebibytes(std::string_view text) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value == 0 ||
      value > kMaxShareMiB) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

PeerShares::PeerShares(std::vector<std::pair<Ipv4, uint64_t>> mebibytes)
    : shares_(std::move(mebibytes)) {
  // Sorted by address and, for one address, smallest first: the first of each is kept.
  std::sort(shares_.begin(), shares_.end());
  shares_.erase(std::unique(shares_.begin(), shares_.end(),
                            [](const auto& a, const auto& b) { return a.first == b.first; }),
                shares_.end());
}

std::optional<uint64_t> PeerShares::bytesOf(Ipv4 address) const {
  auto it = std::lower_bound(shares_.begin(), shares_.end(), address,
                             [](const auto& share, Ipv4 wanted) { return share.first < wanted; });
  if (it == shares_.end() || it->first != address) {
    return std::nullopt;
  }
  return it->second << 20;
}

ParsedShares parsePeerShares(std::string_view text, size_t limit) {
  ParsedShares parsed;
  std::vector<std::pair<Ipv4, uint64_t>> shares;
  while (!text.empty() && shares.size() < limit) {
    const size_t comma = text.find(',');
    const std::string_view entry = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (entry.empty()) {
      continue;
    }
    const size_t equals = entry.find('=');
    const auto address =
        equals == std::string_view::npos ? std::nullopt : parseIpv4(trim(entry.substr(0, equals)));
    const auto mebibytes = equals == std::string_view::npos
                               ? std::nullopt
                               : parseMebibytes(trim(entry.substr(equals + 1)));
    if (address && mebibytes) {
      shares.emplace_back(*address, *mebibytes);
    } else if (parsed.malformed++ == 0) {
      parsed.firstMalformed = std::string(entry.substr(0, kMalformedShown));
    }
  }
  parsed.shares = PeerShares(std::move(shares));
  return parsed;
}

}  // namespace gvirtus::backend_shim
