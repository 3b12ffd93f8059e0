#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

#include "common/controller/controller.h"

namespace gvirtus {

// A controller that works only while this replica leads: each term of leadership runs a
// fresh Controller (one runs once), which first waits for the caches and then has every
// key looked at once, since anything may have changed while no replica led. Cache
// handlers may enqueue at any time; between terms their keys are dropped, as the next
// term looks at every key anyway.
class LeaderController {
 public:
  struct Term {
    // The caches the sync reads have their first contents.
    std::function<bool()> synced;
    // Enqueues every key (through enqueue()), once `synced` holds.
    std::function<void()> enqueueAll;
  };

  LeaderController(ControllerOptions options, SyncFunction sync);

  // Thread-safe; does nothing between terms. `after` as Controller::enqueue().
  void enqueue(const std::string& key, Duration after = Duration::zero());

  // One term: runs until `stop`. May run again after it returned.
  void run(std::stop_token stop, const Term& term);

 private:
  const ControllerOptions options_;
  const SyncFunction sync_;
  std::mutex mutex_;
  std::shared_ptr<Controller> current_;  // while run() runs
};

}  // namespace gvirtus
