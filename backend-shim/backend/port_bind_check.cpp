#include "backend-shim/backend/port_bind_check.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "common/base/unique_fd.h"
#include "common/net/sockets.h"

namespace gvirtus::backend_shim {

Result<bool> portBindable(uint16_t port, bool reuseAddress) {
  UniqueFd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) {
    return fail("cannot open a socket to try port " + std::to_string(port) + ": " +
                errnoText(errno));
  }
  if (reuseAddress) {
    const int one = 1;
    if (::setsockopt(probe.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
      return fail("cannot set SO_REUSEADDR to try port " + std::to_string(port) + ": " +
                  errnoText(errno));
    }
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(probe.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) {
    return true;
  }
  if (errno == EADDRINUSE) {
    return false;
  }
  return fail("cannot try to bind 0.0.0.0:" + std::to_string(port) + ": " + errnoText(errno));
}

}  // namespace gvirtus::backend_shim
