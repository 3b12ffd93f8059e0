#include "backend-shim/backend/output.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>

#include <array>
#include <cerrno>
#include <optional>
#include <string>

#include "backend-shim/backend/line_splitter.h"
#include "common/net/sockets.h"

namespace gvirtus::backend_shim {
namespace {

using Clock = std::chrono::steady_clock;

// One of the backend's streams: its pipe, the line it is in the middle of, and when it last
// wrote to it.
struct Stream {
  int fd = -1;
  LineSplitter splitter;
  Clock::time_point lastByte{};
};

Result<void> makePipe(UniqueFd& read, UniqueFd& write) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    return fail("cannot make a pipe for the backend's output: " + errnoText(errno));
  }
  read.reset(ends[0]);
  write.reset(ends[1]);
  // Never blocks the thread that drains both pipes at the end.
  ::fcntl(read.get(), F_SETFL, O_NONBLOCK);
  return {};
}

}  // namespace

class BackendOutput::Loop {
 public:
  explicit Loop(BackendOutput& output) : output_(output) {
    streams_[0].fd = output.stdoutRead_.get();
    streams_[1].fd = output.stderrRead_.get();
  }

  void run(const std::stop_token& stop) {
    const LineSplitter::Emit emit = [this](std::string_view line) { write(line); };
    while (!stop.stop_requested()) {
      std::array<pollfd, 3> fds{{{streams_[0].fd, POLLIN, 0},
                                 {streams_[1].fd, POLLIN, 0},
                                 {output_.wake_.get(), POLLIN, 0}}};
      const int ready = ::poll(fds.data(), fds.size(), timeoutMs());
      const auto now = Clock::now();
      if (ready > 0) {
        for (size_t i = 0; i < streams_.size(); ++i) {
          if (fds[i].revents != 0) {
            drain(streams_[i], now, emit);
          }
        }
      }
      for (auto& stream : streams_) {
        if (stream.splitter.pending() && now - stream.lastByte >= output_.options_.idleFlush) {
          stream.splitter.flush(emit);
        }
      }
    }
    // The backend is stopped by now: what it wrote last still goes out.
    for (auto& stream : streams_) {
      drain(stream, Clock::now(), emit);
      stream.splitter.flush(emit);
    }
  }

 private:
  // Reads everything the pipe holds now.
  void drain(Stream& stream, Clock::time_point now, const LineSplitter::Emit& emit) {
    char buffer[16384];
    for (;;) {
      const ssize_t got = ::read(stream.fd, buffer, sizeof(buffer));
      if (got > 0) {
        stream.lastByte = now;
        stream.splitter.add(std::string_view(buffer, static_cast<size_t>(got)), emit);
        continue;
      }
      if (got < 0 && errno == EINTR) {
        continue;
      }
      return;  // empty (EAGAIN); never at its end, as the write ends stay open here
    }
  }

  // One line, one write: never split by, nor glued to, anything else written.
  void write(std::string_view line) {
    std::string text(line);
    text += '\n';
    std::string_view left = text;
    while (!left.empty()) {
      const ssize_t put = ::write(output_.options_.target, left.data(), left.size());
      if (put < 0 && errno == EINTR) {
        continue;
      }
      if (put <= 0) {
        return;  // nowhere to write: the line is lost, the backend is not held up
      }
      left.remove_prefix(static_cast<size_t>(put));
    }
    ++output_.lines_;
  }

  // Until the earliest partial line is due, or forever.
  int timeoutMs() const {
    std::optional<Clock::time_point> due;
    for (const auto& stream : streams_) {
      if (stream.splitter.pending()) {
        const auto at = stream.lastByte + output_.options_.idleFlush;
        if (!due || at < *due) {
          due = at;
        }
      }
    }
    if (!due) {
      return -1;
    }
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*due - Clock::now()).count();
    return ms < 0 ? 0 : static_cast<int>(ms);
  }

  BackendOutput& output_;
  std::array<Stream, 2> streams_;
};

BackendOutput::BackendOutput(PassKey, BackendOutputOptions options)
    : options_(std::move(options)) {}

Result<std::unique_ptr<BackendOutput>> BackendOutput::start(BackendOutputOptions options) {
  auto output = std::make_unique<BackendOutput>(PassKey{}, std::move(options));
  if (auto made = makePipe(output->stdoutRead_, output->stdoutWrite_); !made) {
    return fail(made.error());
  }
  if (auto made = makePipe(output->stderrRead_, output->stderrWrite_); !made) {
    return fail(made.error());
  }
  output->wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!output->wake_.valid()) {
    return fail("cannot make an eventfd: " + errnoText(errno));
  }
  BackendOutput* self = output.get();
  output->thread_ = std::jthread([self](std::stop_token stop) { Loop(*self).run(stop); });
  return output;
}

BackendOutput::~BackendOutput() {
  if (thread_.joinable()) {
    thread_.request_stop();
    const uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof(one));
    thread_.join();
  }
}

}  // namespace gvirtus::backend_shim
