#pragma once

#include <functional>
#include <optional>
#include <stop_token>
#include <string>

#include "common/base/error.h"
#include "common/cache/object_cache.h"
#include "common/controller/work_queue.h"
#include "common/time/clock.h"
#include "common/time/duration.h"

namespace gvirtus {

// What a successful sync asks of the loop beyond forgetting the key's backoff.
struct SyncResult {
  // Sync the key again after this long, even when nothing changes (controller-runtime's
  // RequeueAfter): a resync, or a look that time alone makes necessary.
  std::optional<Duration> requeueAfter;
};

// Brings the state named by `key` to what it should be. Idempotent: it reads what is, not
// what happened, so running it again, or for a key whose object is gone, is harmless.
using SyncFunction = std::function<Result<SyncResult>(const std::string& key)>;

struct ControllerOptions {
  std::string name;  // in the log lines
  int workers = 1;
  Duration backoffInitial = std::chrono::milliseconds(800);
  Duration backoffMax = std::chrono::seconds(30);
  // How often run() looks whether the caches have synced, and what it sleeps on.
  Duration syncPoll = std::chrono::milliseconds(100);
  Clock* clock = &systemClock();
};

// The loop every controller runs (sample-controller's shape): event handlers put keys on a
// WorkQueue, `workers` threads take one key at a time and call sync(key). A failed sync
// comes back after the key's next backoff step (a conflict quietly: the watch brings the
// newer object), a successful one forgets the backoff and comes back after requeueAfter
// when it asks. A key never syncs on two workers at once.
class Controller {
 public:
  Controller(ControllerOptions options, SyncFunction sync);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Thread-safe; keys added before run() wait for it. With `after`, the key waits that long
  // first, and changes meanwhile add nothing: a burst of them is one sync.
  void enqueue(const std::string& key, Duration after = Duration::zero());

  // Handlers that enqueue the changed object's cacheKey() on add, update and delete.
  ResourceEventHandlers enqueueObjects();
  // Handlers that enqueue `key` on any change: a controller whose sync looks at the
  // whole cache in one pass.
  ResourceEventHandlers enqueueOnAnyChange(std::string key);

  // Waits until `synced` is true (the caches the sync reads have their first contents),
  // then runs the workers until `stop`; returns once they have finished. Keys left are
  // dropped: run() may not be called again.
  void run(std::stop_token stop, const std::function<bool()>& synced = {});

  // Keys queued or waiting for their time.
  size_t queued() const { return queue_.size(); }

 private:
  void work(std::stop_token stop);
  // Handlers that call `enqueueFor(object)` on add, update (the new object) and delete.
  static ResourceEventHandlers onEveryChange(std::function<void(const nlohmann::json&)> enqueueFor);

  const ControllerOptions options_;
  const SyncFunction sync_;
  WorkQueue queue_;
};

}  // namespace gvirtus
