#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "backend-shim/load/nvml_gpus.h"
#include "common/base/error.h"
#include "common/time/duration.h"

// The gvirtus.io/load annotation on the shim's own pod: what the webhook reads to choose a
// backend (docs/pod-contract.md).
namespace gvirtus::backend_shim {

inline constexpr std::string_view kLoadAnnotation = "gvirtus.io/load";

struct Load {
  int connections = 0;
  int maxSessions = 0;
  std::vector<GpuInfo> gpus;
};

// The annotation's value (renderBackendLoad() of common/contract/backend_load.h), GPU memory in
// MiB.
std::string renderLoad(const Load& load, std::chrono::system_clock::time_point updated);

// The JSON merge patch that sets the annotation to `value`.
std::string loadAnnotationPatch(const std::string& value);

// Writes the load when it changes (`updated` aside), at most once per interval. API errors
// are logged and the write is tried again an interval later; they are never fatal.
class LoadPublisher {
 public:
  using Clock = std::chrono::steady_clock;
  // Sends a merge patch to the pod; the caller binds the client, namespace and name.
  using PatchFn = std::function<Result<void>(const std::string& mergePatch)>;

  LoadPublisher(PatchFn patch, Duration interval,
                std::function<std::chrono::system_clock::time_point()> wallClock = {});

  // The latest load (thread-safe).
  void update(Load load);
  // Writes the latest load when it differs from the last one written and the last attempt
  // is at least an interval old. Returns true when it wrote.
  bool publishIfDue(Clock::time_point now);
  // Calls publishIfDue() until `stop` is requested.
  void run(std::stop_token stop);

  int64_t writes() const;
  int64_t failures() const;
  // Looks that found the written load still current, counted (and logged at debug) at most
  // once per interval: the record that steady numbers were looked at and left alone.
  int64_t unchanged() const;

 private:
  PatchFn patch_;
  Duration interval_;
  std::function<std::chrono::system_clock::time_point()> wallClock_;

  mutable std::mutex mutex_;
  std::optional<Load> latest_;  // guarded by mutex_
  std::string published_;       // the last value written, `updated` left out
  std::optional<Clock::time_point> lastAttempt_;
  std::optional<Clock::time_point> lastWritten_;
  std::optional<Clock::time_point> lastUnchanged_;
  int64_t writes_ = 0;
  int64_t unchanged_ = 0;
  int64_t failures_ = 0;
};

}  // namespace gvirtus::backend_shim
