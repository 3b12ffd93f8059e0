#include "common/controller/leader_controller.h"

namespace gvirtus {

LeaderController::LeaderController(ControllerOptions options, SyncFunction sync)
    : options_(std::move(options)), sync_(std::move(sync)) {}

void LeaderController::enqueue(const std::string& key, Duration after) {
  std::lock_guard lock(mutex_);
  if (current_) {
    current_->enqueue(key, after);
  }
}

void LeaderController::run(std::stop_token stop, const Term& term) {
  auto controller = std::make_shared<Controller>(options_, sync_);
  {
    std::lock_guard lock(mutex_);
    current_ = controller;
  }
  controller->run(stop, [&] {
    if (!term.synced()) {
      return false;
    }
    term.enqueueAll();
    return true;
  });
  std::lock_guard lock(mutex_);
  current_.reset();
}

}  // namespace gvirtus
