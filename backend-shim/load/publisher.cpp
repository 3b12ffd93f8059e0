#include "backend-shim/load/publisher.h"

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>

#include "common/contract/backend_load.h"
#include "common/telemetry/log.h"
#include "common/time/stoppable_sleep.h"

namespace gvirtus::backend_shim {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;
constexpr auto kTick = std::chrono::milliseconds(250);
// How often an unchanged load is written again (the webhook ages loads out after a minute).
constexpr auto kRefreshAfter = std::chrono::seconds(30);

BackendLoad backendLoad(const Load& load,
                        std::optional<std::chrono::system_clock::time_point> updated) {
  BackendLoad out{.connections = load.connections,
                  .maxSessions = load.maxSessions,
                  .gpus = {},
                  .updated = updated};
  for (const auto& gpu : load.gpus) {
    out.gpus.push_back(GpuLoad{.index = gpu.index,
                               .memoryTotalMiB = static_cast<int64_t>(gpu.memoryTotalBytes / kMiB),
                               .memoryUsedMiB = static_cast<int64_t>(gpu.memoryUsedBytes / kMiB),
                               .utilization = gpu.utilizationPercent,
                               .uuid = gpu.uuid,
                               .model = gpu.model});
  }
  return out;
}

}  // namespace

std::string renderLoad(const Load& load, std::chrono::system_clock::time_point updated) {
  return renderBackendLoad(backendLoad(load, updated));
}

std::string loadAnnotationPatch(const std::string& value) {
  nlohmann::json patch;
  patch["metadata"]["annotations"][std::string(kLoadAnnotation)] = value;
  return patch.dump();
}

LoadPublisher::LoadPublisher(PatchFn patch, Duration interval,
                             std::function<std::chrono::system_clock::time_point()> wallClock)
    : patch_(std::move(patch)), interval_(interval), wallClock_(std::move(wallClock)) {
  if (!wallClock_) {
    wallClock_ = [] { return std::chrono::system_clock::now(); };
  }
}

void LoadPublisher::update(Load load) {
  std::lock_guard lock(mutex_);
  latest_ = std::move(load);
}

bool LoadPublisher::publishIfDue(Clock::time_point now) {
  std::string key;
  std::string value;
  {
    std::lock_guard lock(mutex_);
    if (!latest_) {
      return false;
    }
    key = renderBackendLoad(backendLoad(*latest_, std::nullopt));
    // An unchanged load is written again now and then: the webhook takes a load older than
    // a minute as unknown, so `updated` doubles as the shim's heartbeat.
    if (key == published_ && lastWritten_ && now - *lastWritten_ < kRefreshAfter) {
      if (!lastUnchanged_ || now - *lastUnchanged_ >= interval_) {
        lastUnchanged_ = now;
        ++unchanged_;
        log::debug("load unchanged; not written again",
                   {{"connections", latest_->connections}, {"looks", unchanged_}});
      }
      return false;
    }
    if (lastAttempt_ && now - *lastAttempt_ < interval_) {
      return false;
    }
    lastAttempt_ = now;
    value = renderLoad(*latest_, wallClock_());
  }
  // The API call runs unlocked: update() never waits for the network.
  auto written = patch_(loadAnnotationPatch(value));
  std::lock_guard lock(mutex_);
  if (!written) {
    ++failures_;
    log::warn("cannot publish the load annotation; will retry",
              {{"error", written.error().message}, {"retryIn", formatDuration(interval_)}});
    return false;
  }
  ++writes_;
  published_ = key;
  lastWritten_ = now;
  log::debug("published the load annotation", {{"value", value}});
  return true;
}

void LoadPublisher::run(std::stop_token stop) {
  const Duration tick = std::clamp<Duration>(interval_, std::chrono::milliseconds(50), kTick);
  do {
    publishIfDue(Clock::now());
  } while (sleepUnlessStopped(stop, tick));
}

int64_t LoadPublisher::writes() const {
  std::lock_guard lock(mutex_);
  return writes_;
}

int64_t LoadPublisher::unchanged() const {
  std::lock_guard lock(mutex_);
  return unchanged_;
}

int64_t LoadPublisher::failures() const {
  std::lock_guard lock(mutex_);
  return failures_;
}

}  // namespace gvirtus::backend_shim
