#include "common/http/stream.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/net/sockets.h"
#include "common/tls/server_context.h"

namespace gvirtus {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kReadBufferSize = 16 * 1024;

// Runs one non-blocking send or recv until it moves bytes, waiting for the socket to be
// ready (`events`) until the deadline; -1 on an error or at the deadline.
template <typename Io>
ssize_t untilReady(int fd, short events, Clock::time_point deadline, Io io) {
  for (;;) {
    ssize_t n = io();
    if (n >= 0) {
      return n;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return -1;
    }
    if (!waitForFd(fd, events, deadline)) {
      return -1;
    }
  }
}

}  // namespace

HttpStream::HttpStream(int fd, TlsSession* tls, Duration readTimeout, Duration writeTimeout)
    : fd_(fd),
      tls_(tls),
      readTimeout_(readTimeout),
      writeTimeout_(writeTimeout),
      buf_(kReadBufferSize) {}

void HttpStream::skipEmptyLines() {
  while (end_ - begin_ >= 2 && buf_[begin_] == '\r' && buf_[begin_ + 1] == '\n') {
    begin_ += 2;
  }
}

HttpStream::Fill HttpStream::fillNow() {
  makeRoom();
  char* at = buf_.data() + end_;
  size_t room = buf_.size() - end_;
  if (tls_ != nullptr) {
    size_t got = 0;
    switch (tls_->readSome(at, room, got)) {
      case TlsSession::Step::Done:
        end_ += got;
        return Fill::Got;
      case TlsSession::Step::WantRead:
        return Fill::WantRead;
      case TlsSession::Step::WantWrite:
        return Fill::WantWrite;
      case TlsSession::Step::Closed:
      case TlsSession::Step::Failed:
        return Fill::Closed;
    }
    return Fill::Closed;
  }
  for (;;) {
    ssize_t n = ::recv(fd_, at, room, MSG_DONTWAIT);
    if (n > 0) {
      end_ += static_cast<size_t>(n);
      return Fill::Got;
    }
    if (n == 0) {
      return Fill::Closed;
    }
    if (errno == EINTR) {
      continue;
    }
    return errno == EAGAIN || errno == EWOULDBLOCK ? Fill::WantRead : Fill::Closed;
  }
}

bool HttpStream::writeNow(std::string_view data) {
  while (!data.empty()) {
    size_t moved = 0;
    if (tls_ != nullptr) {
      if (tls_->writeSome(data.data(), data.size(), moved) != TlsSession::Step::Done) {
        return false;
      }
    } else {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        return false;
      }
      moved = static_cast<size_t>(n);
    }
    data.remove_prefix(moved);
  }
  return true;
}

HttpStream::Read HttpStream::readHead(size_t limit, std::string_view& head) {
  size_t scanned = 0;
  for (;;) {
    skipEmptyLines();
    std::string_view pending = buffered();
    auto end = pending.find("\r\n\r\n", scanned);
    if (end != std::string_view::npos && end + 4 <= limit) {
      head = pending.substr(0, end + 4);
      begin_ += end + 4;
      return Read::Ok;
    }
    if (pending.size() >= limit) {
      return Read::TooLarge;
    }
    scanned = pending.size() >= 3 ? pending.size() - 3 : 0;
    if (!fill()) {
      return Read::Closed;
    }
  }
}

HttpStream::Read HttpStream::readLine(size_t limit, std::string& line) {
  size_t scanned = 0;
  for (;;) {
    std::string_view pending = buffered();
    auto end = pending.find("\r\n", scanned);
    if (end != std::string_view::npos && end <= limit) {
      line.assign(pending.substr(0, end));
      begin_ += end + 2;
      return Read::Ok;
    }
    if (pending.size() > limit + 1) {
      return Read::TooLarge;
    }
    scanned = pending.empty() ? 0 : pending.size() - 1;
    if (!fill()) {
      return Read::Closed;
    }
  }
}

bool HttpStream::readExact(size_t n, std::string& out) {
  size_t target = out.size() + n;
  while (out.size() < target) {
    size_t want = target - out.size();
    if (begin_ < end_) {
      size_t take = std::min(want, end_ - begin_);
      out.append(buf_.data() + begin_, take);
      begin_ += take;
    } else if (want >= kReadBufferSize) {
      // Large bodies go straight into place.
      size_t old = out.size();
      out.resize(target);
      ssize_t got = rawRead(out.data() + old, want);
      out.resize(old + static_cast<size_t>(std::max<ssize_t>(got, 0)));
      if (got <= 0) {
        return false;
      }
    } else if (!fill()) {
      return false;
    }
  }
  return true;
}

bool HttpStream::writeAll(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(data.data(), data.size());
    if (n <= 0) {
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void HttpStream::makeRoom() {
  if (begin_ == end_) {
    begin_ = end_ = 0;
  } else if (end_ == buf_.size()) {
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    } else {
      buf_.resize(buf_.size() * 2);
    }
  }
}

bool HttpStream::fill() {
  makeRoom();
  ssize_t n = rawRead(buf_.data() + end_, buf_.size() - end_);
  if (n <= 0) {
    return false;
  }
  end_ += static_cast<size_t>(n);
  return true;
}

ssize_t HttpStream::write(const char* ptr, size_t size) {
  auto deadline = Clock::now() + writeTimeout_;
  if (tls_ != nullptr) {
    return tls_->write(ptr, size, deadline);
  }
  return untilReady(fd_, POLLOUT, deadline, [&] { return ::send(fd_, ptr, size, MSG_NOSIGNAL); });
}

ssize_t HttpStream::rawRead(char* ptr, size_t size) {
  auto deadline = std::min(Clock::now() + readTimeout_, readDeadline_);
  if (tls_ != nullptr) {
    return tls_->read(ptr, size, deadline);
  }
  return untilReady(fd_, POLLIN, deadline, [&] { return ::recv(fd_, ptr, size, 0); });
}

}  // namespace gvirtus
