#include "common/http/reader.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "common/net/sockets.h"
#include "common/telemetry/log.h"

namespace gvirtus {

namespace {

using Clock = std::chrono::steady_clock;
using Phase = HttpConnection::Phase;

// How often the reader closes the connections past their deadlines.
constexpr auto kDeadlineSweep = std::chrono::milliseconds(50);

}  // namespace

Result<std::unique_ptr<HttpReader>> HttpReader::create(Settings settings, Hooks hooks) {
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) {
    return fail("epoll_create1: " + errnoText(errno));
  }
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) {
    return fail("eventfd: " + errnoText(errno));
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = wake.get();
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, wake.get(), &event) != 0) {
    return fail("epoll_ctl: " + errnoText(errno));
  }
  return std::make_unique<HttpReader>(std::move(settings), std::move(hooks), std::move(epoll),
                                      std::move(wake));
}

HttpReader::HttpReader(Settings settings, Hooks hooks, UniqueFd epoll, UniqueFd wake)
    : settings_(std::move(settings)),
      hooks_(std::move(hooks)),
      epoll_(std::move(epoll)),
      wake_(std::move(wake)),
      thread_([this] { loop(); }) {}

HttpReader::~HttpReader() {
  stop();
}

void HttpReader::add(std::unique_ptr<HttpConnection> connection) {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) {
      return;
    }
    arrived_.push_back(std::move(connection));
  }
  ::eventfd_write(wake_.get(), 1);
}

void HttpReader::stop() {
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
  }
  ::eventfd_write(wake_.get(), 1);
  if (thread_.joinable()) {
    thread_.join();
  }
}

void HttpReader::loop() {
  std::array<epoll_event, 64> events{};
  auto nextSweep = Clock::now() + kDeadlineSweep;
  for (;;) {
    auto wait = std::chrono::ceil<std::chrono::milliseconds>(nextSweep - Clock::now());
    int n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()),
                         static_cast<int>(std::max<int64_t>(wait.count(), 0)));
    if (n < 0 && errno != EINTR) {
      log::error("HTTP reader failed", {{"server", settings_.name}, {"error", errnoText(errno)}});
      break;
    }
    bool woken = false;
    for (int i = 0; i < n; ++i) {
      if (events[static_cast<size_t>(i)].data.fd == wake_.get()) {
        woken = true;
      } else {
        int fd = events[static_cast<size_t>(i)].data.fd;
        if (auto it = connections_.find(fd); it != connections_.end()) {
          advance(*it->second);
        }
      }
    }
    if (woken) {
      eventfd_t ignored = 0;
      ::eventfd_read(wake_.get(), &ignored);
      std::vector<std::unique_ptr<HttpConnection>> arrived;
      {
        std::lock_guard lock(mutex_);
        if (stopped_) {
          break;
        }
        arrived.swap(arrived_);
      }
      for (auto& connection : arrived) {
        take(std::move(connection));
      }
    }
    auto now = Clock::now();
    if (now >= nextSweep) {
      sweep(now);
      nextSweep = now + kDeadlineSweep;
    }
  }
  std::lock_guard lock(mutex_);
  stopped_ = true;
  arrived_.clear();
  connections_.clear();
}

void HttpReader::take(std::unique_ptr<HttpConnection> connection) {
  HttpConnection& c = *connection;
  connections_.emplace(c.fd.get(), std::move(connection));
  advance(c);
}

void HttpReader::advance(HttpConnection& c) {
  switch (step(c)) {
    case Next::Wait:
      return;
    case Next::Dispatch:
      dispatch(c.fd.get());
      return;
    case Next::Close:
      close(c.fd.get());
      return;
  }
}

HttpReader::Next HttpReader::step(HttpConnection& c) {
  if (c.phase == Phase::Handshake) {
    switch (c.tls->handshake()) {
      case TlsSession::Step::Done:
        c.phase = Phase::Idle;
        c.deadline = Clock::now() + settings_.readTimeout;
        break;
      case TlsSession::Step::WantRead:
        return watch(c, EPOLLIN);
      case TlsSession::Step::WantWrite:
        return watch(c, EPOLLOUT);
      case TlsSession::Step::Closed:
      case TlsSession::Step::Failed:
        return Next::Close;
    }
  }
  if (c.phase == Phase::Draining) {
    return drain(c);
  }
  switch (c.readRequest(settings_.requestTimeout)) {
    case HttpConnection::Progress::Whole:
      return Next::Dispatch;
    case HttpConnection::Progress::WantRead:
      return watch(c, EPOLLIN);
    case HttpConnection::Progress::WantWrite:
      return watch(c, EPOLLOUT);
    case HttpConnection::Progress::Closed:
      return Next::Close;
  }
  return Next::Close;
}

HttpReader::Next HttpReader::drain(HttpConnection& c) {
  std::array<char, 16 * 1024> sink{};
  for (;;) {
    ssize_t n = ::recv(c.fd.get(), sink.data(), sink.size(), MSG_DONTWAIT);
    if (n > 0) {
      c.drained += static_cast<size_t>(n);
      if (c.drained >= kLingerBytes) {
        return Next::Close;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return watch(c, EPOLLIN);
    }
    return Next::Close;
  }
}

HttpReader::Next HttpReader::watch(HttpConnection& c, uint32_t events) {
  if (c.watched == events) {
    return Next::Wait;
  }
  epoll_event event{};
  event.events = events;
  event.data.fd = c.fd.get();
  int op = c.watched == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
  if (::epoll_ctl(epoll_.get(), op, c.fd.get(), &event) != 0) {
    log::error("HTTP reader cannot watch a connection",
               {{"server", settings_.name}, {"error", errnoText(errno)}});
    return Next::Close;
  }
  c.watched = events;
  return Next::Wait;
}

std::unique_ptr<HttpConnection> HttpReader::release(int fd) {
  auto it = connections_.find(fd);
  std::unique_ptr<HttpConnection> connection = std::move(it->second);
  connections_.erase(it);
  if (connection->watched != 0) {
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
    connection->watched = 0;
  }
  return connection;
}

void HttpReader::close(int fd) {
  release(fd);
}

void HttpReader::dispatch(int fd) {
  std::unique_ptr<HttpConnection> connection = release(fd);
  connection->stream.setReadDeadline(connection->deadline);
  if (hooks_.dispatch(connection)) {
    return;
  }
  hooks_.overloaded();
  connection->answerAndDrain(503, "server busy\n");
  take(std::move(connection));
}

void HttpReader::sweep(Clock::time_point now) {
  std::vector<int> expired;
  for (const auto& [fd, connection] : connections_) {
    if (connection->deadline <= now) {
      expired.push_back(fd);
    }
  }
  for (int fd : expired) {
    HttpConnection& c = *connections_.at(fd);
    switch (c.phase) {
      case Phase::Handshake:
        hooks_.timedOut(c, "TLS handshake");
        close(fd);
        break;
      case Phase::Reading:
        hooks_.timedOut(c, "request");
        c.answerAndDrain(408, "request timeout\n");
        advance(c);
        break;
      case Phase::Idle:
      case Phase::Draining:
        close(fd);
        break;
    }
  }
}

}  // namespace gvirtus
