#include "common/http/connection_registry.h"

#include <sys/socket.h>

namespace gvirtus {

HttpConnectionRegistry::Admit HttpConnectionRegistry::admit(int fd, const std::string& peer,
                                                            size_t perPeer, size_t total) {
  std::lock_guard lock(mutex_);
  if (stopping_) {
    return Admit::Stopping;
  }
  if (fds_.size() >= total) {
    return Admit::ServerFull;
  }
  size_t& count = peers_[peer];
  if (count >= perPeer) {
    return Admit::PeerFull;  // the entry exists: this peer has connections open
  }
  ++count;
  fds_.insert(fd);
  return Admit::Ok;
}

void HttpConnectionRegistry::release(int fd, const std::string& peer) {
  std::lock_guard lock(mutex_);
  fds_.erase(fd);
  auto it = peers_.find(peer);
  if (it != peers_.end() && --it->second == 0) {
    peers_.erase(it);
  }
}

void HttpConnectionRegistry::shutdownAll() {
  std::lock_guard lock(mutex_);
  stopping_ = true;
  for (int fd : fds_) {
    ::shutdown(fd, SHUT_RDWR);
  }
}

size_t HttpConnectionRegistry::size() const {
  std::lock_guard lock(mutex_);
  return fds_.size();
}

}  // namespace gvirtus
