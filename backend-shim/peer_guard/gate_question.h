#pragma once

#include <stdint.h>

#include "backend-shim/peer_guard/guard_settings.h"

namespace gvirtus::peer_guard {

// Asks the shim's gate whether a peer may connect (`address`: 16 bytes of IPv6 in network
// order, an IPv4 peer mapped). False when the gate says no and on every failure (no gate, no
// answer within the timeout): the guard fails closed. Leaves errno as it found it.
bool gateAllows(const Settings& settings, const uint8_t (&address)[16]);

}  // namespace gvirtus::peer_guard
