#include "common/http/listener.h"

#include <sys/socket.h>

#include <cerrno>
#include <chrono>

#include "common/net/sockets.h"
#include "common/telemetry/log.h"

namespace gvirtus {

HttpListener::HttpListener(std::string host, int port, std::string name)
    : host_(std::move(host)), requestedPort_(port), name_(std::move(name)) {}

Result<void> HttpListener::bind() {
  std::lock_guard lock(mutex_);
  return bindLocked();
}

Result<void> HttpListener::bindLocked() {
  auto fd = openListener(host_, requestedPort_);
  if (!fd) {
    return fail(fd.error());
  }
  port_ = boundPort(fd->get());
  fd_ = std::move(*fd);
  return {};
}

void HttpListener::run(const Admit& admit) {
  for (;;) {
    acceptConnections(admit);
    std::unique_lock lock(mutex_);
    fd_.reset();
    if (stopped_ || !reopen(lock)) {
      break;
    }
  }
}

void HttpListener::stop() {
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    // Wakes the accept loop: accept fails and run() returns.
    if (fd_.get() >= 0) {
      ::shutdown(fd_.get(), SHUT_RDWR);
    }
  }
  cv_.notify_all();
}

int HttpListener::port() const {
  return port_;
}

void HttpListener::acceptConnections(const Admit& admit) {
  for (;;) {
    int accepted = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (accepted >= 0) {
      admit(UniqueFd(accepted));
      continue;
    }
    int err = errno;
    if (err == EINTR || err == ECONNABORTED || err == EPROTO || err == EPERM) {
      continue;
    }
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
      // Out of descriptors or memory: the backlog holds new connections while workers
      // finish theirs; pause instead of spinning on the same error.
      log::warn("HTTP accept failed; pausing", {{"server", name_}, {"error", errnoText(err)}});
      std::unique_lock lock(mutex_);
      if (cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stopped_.load(); })) {
        return;
      }
      continue;
    }
    if (!stopped_) {
      log::error("HTTP accept failed", {{"server", name_}, {"error", errnoText(err)}});
    }
    return;
  }
}

bool HttpListener::reopen(std::unique_lock<std::mutex>& lock) {
  log::error("HTTP listener failed; opening it again", {{"server", name_}, {"port", port_.load()}});
  for (;;) {
    if (cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopped_.load(); })) {
      return false;
    }
    requestedPort_ = port_;
    auto bound = bindLocked();
    if (bound) {
      return true;
    }
    log::error("HTTP listener could not be opened again",
               {{"server", name_}, {"error", bound.error().message}});
  }
}

}  // namespace gvirtus
