#pragma once

#include <cstdint>

#include "common/base/error.h"

// Whether the backend could bind its port now. GVirtuS binds 0.0.0.0:port and listens at
// once; without a working SO_REUSEADDR its bind fails while any old connection on the port
// lingers (TIME_WAIT, FIN_WAIT2, LAST_ACK: up to about two minutes), and it then never
// listens. The supervisor asks this before each start, so that it starts the backend only
// into a port it can take.
namespace gvirtus::backend_shim {

// Binds a TCP socket to 0.0.0.0:`port` the way the backend will (with SO_REUSEADDR only when
// `reuseAddress`: the peer guard makes GVirtuS's request for it work) and closes it at once;
// it never listens, so it leaves nothing behind. True when the bind succeeds, false when the
// address is in use, an error for any other failure (the caller cannot tell then).
Result<bool> portBindable(uint16_t port, bool reuseAddress);

}  // namespace gvirtus::backend_shim
