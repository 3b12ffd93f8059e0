#include "backend-shim/sessions/host.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "backend-shim/sessions/loop.h"
#include "common/net/sockets.h"
#include "common/telemetry/log.h"

namespace gvirtus::backend_shim {

Result<std::unique_ptr<SessionHost>> SessionHost::start(SessionHostOptions options) {
  auto listener = openListener("0.0.0.0", options.port);
  if (!listener) {
    return fail(listener.error().context("listen on port " + std::to_string(options.port)));
  }
  if (::fcntl(listener->get(), F_SETFL, ::fcntl(listener->get(), F_GETFL) | O_NONBLOCK) != 0) {
    return fail("cannot listen on port " + std::to_string(options.port) + ": " + errnoText(errno));
  }
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) {
    return fail("cannot make an eventfd: " + errnoText(errno));
  }
  auto host = std::make_unique<SessionHost>(PassKey{}, std::move(options), std::move(*listener),
                                            std::move(wake));
  host->thread_ = std::jthread([raw = host.get()](std::stop_token stop) {
    Loop loop(*raw);
    loop.run(stop);
  });
  return host;
}

SessionHost::SessionHost(PassKey, SessionHostOptions options, UniqueFd listener, UniqueFd wake)
    : options_(std::move(options)), listener_(std::move(listener)), wake_(std::move(wake)) {}

SessionHost::~SessionHost() {
  stop();
}

void SessionHost::publish(const SessionHostStatus& status) {
  {
    std::lock_guard lock(mutex_);
    status_ = status;
  }
  changed_.notify_all();
}

SessionHostStatus SessionHost::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

void SessionHost::refuseNewSessions() {
  if (!draining_.exchange(true)) {
    log::info("refusing every new session: the backend is draining");
  }
  const uint64_t one = 1;
  (void)::write(wake_.get(), &one, sizeof(one));
}

bool SessionHost::waitForDrain(Duration timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [this] { return status_.connections == 0; });
}

void SessionHost::stop() {
  if (!thread_.joinable()) {
    return;
  }
  thread_.request_stop();
  const uint64_t one = 1;
  (void)::write(wake_.get(), &one, sizeof(one));
  thread_.join();
  std::lock_guard lock(mutex_);
  status_.listening = false;
  status_.ready = false;
}

}  // namespace gvirtus::backend_shim
