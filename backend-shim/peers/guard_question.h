#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "backend-shim/peer_guard/peer_guard_protocol.h"
#include "backend-shim/peers/list.h"

namespace gvirtus::backend_shim {

// The peer a guard's question is about: an IPv4 address (mapped in the question), or only
// the text of an IPv6 one, which no peer list holds.
struct QuestionPeer {
  std::optional<Ipv4> v4;
  std::string text;  // for the log
};

using GuardQuestion = std::array<uint8_t, gvirtus::peer_guard::kRequestSize>;

// The peer of a question as the guard sends it (peer_guard_protocol.h); nullopt when the
// bytes are not one.
std::optional<QuestionPeer> decodeQuestion(const GuardQuestion& question);

}  // namespace gvirtus::backend_shim
