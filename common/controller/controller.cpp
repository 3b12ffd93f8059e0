#include "common/controller/controller.h"

#include <thread>
#include <vector>

#include "common/telemetry/log.h"

namespace gvirtus {

Controller::Controller(ControllerOptions options, SyncFunction sync)
    : options_(std::move(options)),
      sync_(std::move(sync)),
      queue_(options_.backoffInitial, options_.backoffMax) {}

Controller::~Controller() {
  queue_.shutDown();
}

void Controller::enqueue(const std::string& key, Duration after) {
  queue_.addAfter(key, after);
}

ResourceEventHandlers Controller::onEveryChange(
    std::function<void(const nlohmann::json&)> enqueueFor) {
  return {.onAdd = enqueueFor,
          .onUpdate = [enqueueFor](const nlohmann::json&,
                                   const nlohmann::json& now) { enqueueFor(now); },
          .onDelete = enqueueFor};
}

ResourceEventHandlers Controller::enqueueObjects() {
  return onEveryChange([this](const nlohmann::json& object) { queue_.add(cacheKey(object)); });
}

ResourceEventHandlers Controller::enqueueOnAnyChange(std::string key) {
  return onEveryChange([this, key = std::move(key)](const nlohmann::json&) { queue_.add(key); });
}

void Controller::work(std::stop_token stop) {
  while (auto key = queue_.get(stop)) {
    auto synced = sync_(*key);
    if (synced) {
      queue_.forget(*key);
      if (synced->requeueAfter) {
        queue_.addAfter(*key, *synced->requeueAfter);
      }
    } else if (synced.error().isConflict()) {
      log::debug("sync met a newer object; retrying",
                 {{"controller", options_.name}, {"key", *key}});
      queue_.addRateLimited(*key);
    } else {
      log::error("sync failed; retrying with backoff",
                 {{"controller", options_.name}, {"key", *key}, {"error", synced.error().message}});
      queue_.addRateLimited(*key);
    }
    queue_.done(*key);
  }
}

void Controller::run(std::stop_token stop, const std::function<bool()>& synced) {
  std::stop_callback shutDown(stop, [this] { queue_.shutDown(); });
  while (synced && !synced() && options_.clock->sleepUnlessStopped(stop, options_.syncPoll)) {
  }
  if (stop.stop_requested()) {
    return;
  }
  // The calling thread is the first worker; all return once `stop` shuts the queue down.
  std::vector<std::jthread> others;
  for (int i = 1; i < options_.workers; ++i) {
    others.emplace_back([this, stop] { work(stop); });
  }
  work(stop);
}

}  // namespace gvirtus
