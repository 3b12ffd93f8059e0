#include "backend-shim/peers/private_unix_listener.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/net/sockets.h"

namespace gvirtus::backend_shim {

PrivateUnixListener::PrivateUnixListener(PassKey, std::string dir) : dir_(std::move(dir)) {}

Result<std::unique_ptr<PrivateUnixListener>> PrivateUnixListener::open(const std::string& parentDir,
                                                                       const std::string& prefix,
                                                                       const std::string& name,
                                                                       int backlog) {
  std::string parent = parentDir;
  if (parent.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    parent = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string pattern = parent + "/" + prefix + "XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    return fail("cannot make a private folder in " + parent + ": " + errnoText(errno));
  }
  auto listener = std::make_unique<PrivateUnixListener>(PassKey{}, pattern);  // removes it
  listener->path_ = pattern + "/" + name;
  sockaddr_un address{};
  if (listener->path_.size() >= sizeof(address.sun_path)) {
    return fail("the socket path is too long for a unix socket: " + listener->path_);
  }
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, listener->path_.c_str(), listener->path_.size() + 1);
  listener->fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listener->fd_.valid() ||
      ::bind(listener->fd(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener->fd(), backlog) != 0) {
    return fail("cannot listen on " + listener->path_ + ": " + errnoText(errno));
  }
  return listener;
}

PrivateUnixListener::~PrivateUnixListener() {
  fd_.reset();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace gvirtus::backend_shim
