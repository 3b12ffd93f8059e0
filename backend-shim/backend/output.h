#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "backend-shim/backend/process_group.h"
#include "common/base/error.h"
#include "common/base/unique_fd.h"
#include "common/time/duration.h"

// The backend's stdout and stderr, read through pipes and written to the shim's stdout as
// whole lines. Without it the backend wrote to the shim's own streams: its partial lines
// (C stdio) got the shim's log lines glued onto them, and a JSON log pipeline dropped both.
// Here one thread is the only writer of the shim's stdout (the shim logs to stderr), and
// each line is one write(2) of at most PIPE_BUF bytes.
namespace gvirtus::backend_shim {

struct BackendOutputOptions {
  int target = STDOUT_FILENO;  // where the lines go
  // A partial line is written (with a newline) after its writer has been quiet this long.
  Duration idleFlush = std::chrono::milliseconds(200);
};

class BackendOutput {
 public:
  // Makes the two pipes and starts the thread.
  static Result<std::unique_ptr<BackendOutput>> start(BackendOutputOptions options = {});
  // Reads what the pipes still hold, writes it (partial lines too) and stops the thread.
  ~BackendOutput();
  BackendOutput(const BackendOutput&) = delete;
  BackendOutput& operator=(const BackendOutput&) = delete;

  class PassKey {
    friend class BackendOutput;
    explicit PassKey() = default;
  };
  BackendOutput(PassKey, BackendOutputOptions options);

  // The pipes' write ends, for the backend (ProcessGroup::start). They stay open here for
  // the shim's life, so that each restarted backend writes to the same pipes.
  ProcessOutput childOutput() const { return {stdoutWrite_.get(), stderrWrite_.get()}; }
  // Lines written so far: a fact the tests wait for.
  int64_t lines() const { return lines_.load(); }

 private:
  class Loop;

  BackendOutputOptions options_;
  UniqueFd stdoutRead_, stdoutWrite_, stderrRead_, stderrWrite_;
  UniqueFd wake_;  // an eventfd: stop
  std::atomic<int64_t> lines_{0};
  std::jthread thread_;  // last member: stopped first
};

}  // namespace gvirtus::backend_shim
