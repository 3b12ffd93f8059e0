#pragma once

#include <cstddef>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

// The open connections of a server, counted in all and by peer (source address), so that
// a new connection beyond either limit is closed at once and stop() can wake every one.
// Internal to HttpServer.
namespace gvirtus {

class HttpConnectionRegistry {
 public:
  enum class Admit { Ok, PeerFull, ServerFull, Stopping };

  // Counts the connection `fd` of `peer` in, unless `peer` has `perPeer` open, `total` are
  // open, or shutdownAll() was called.
  Admit admit(int fd, const std::string& peer, size_t perPeer, size_t total);
  // Counts it out, before its descriptor closes.
  void release(int fd, const std::string& peer);
  // Admits nothing more and shuts every open connection down: whatever waits on one wakes.
  void shutdownAll();
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::set<int> fds_;
  std::unordered_map<std::string, size_t> peers_;
  bool stopping_ = false;
};

}  // namespace gvirtus
