#include "backend-shim/peers/guard_question.h"

#include <arpa/inet.h>

#include <algorithm>
#include <iterator>

namespace gvirtus::backend_shim {
namespace {

namespace protocol = gvirtus::peer_guard;
constexpr std::array<uint8_t, 12> kMappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

}  // namespace

std::optional<QuestionPeer> decodeQuestion(const GuardQuestion& question) {
  if (!std::equal(std::begin(protocol::kMagic), std::end(protocol::kMagic), question.begin())) {
    return std::nullopt;
  }
  const uint8_t* address = question.data() + protocol::kAddressOffset;
  if (std::equal(kMappedPrefix.begin(), kMappedPrefix.end(), address)) {
    const Ipv4 v4 = (Ipv4{address[12]} << 24) | (Ipv4{address[13]} << 16) |
                    (Ipv4{address[14]} << 8) | Ipv4{address[15]};
    return QuestionPeer{v4, formatIpv4(v4)};
  }
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, address, text, sizeof(text));
  return QuestionPeer{std::nullopt, text};
}

}  // namespace gvirtus::backend_shim
