#include "common/http/workers.h"

#include <algorithm>

namespace gvirtus {

HttpWorkers::HttpWorkers(size_t workers, size_t maxQueued, Serve serve)
    : maxQueued_(maxQueued), serve_(std::move(serve)) {
  workers = std::max<size_t>(workers, 1);
  threads_.reserve(workers);
  for (size_t i = 0; i < workers; ++i) {
    threads_.emplace_back([this] { work(); });
  }
}

HttpWorkers::~HttpWorkers() {
  shutdown();
}

bool HttpWorkers::submit(std::unique_ptr<HttpConnection>& connection) {
  {
    std::lock_guard lock(mutex_);
    if (fullLocked()) {
      return false;
    }
    queue_.push_back(std::move(connection));
  }
  cv_.notify_one();
  return true;
}

bool HttpWorkers::full() {
  std::lock_guard lock(mutex_);
  return fullLocked();
}

bool HttpWorkers::spare() {
  std::lock_guard lock(mutex_);
  return !shutdown_ && queue_.empty() && idle_ > 0;
}

void HttpWorkers::shutdown() {
  {
    std::lock_guard lock(mutex_);
    shutdown_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  threads_.clear();
}

bool HttpWorkers::fullLocked() const {
  return shutdown_ || queue_.size() >= idle_ + maxQueued_;
}

void HttpWorkers::work() {
  for (;;) {
    std::unique_ptr<HttpConnection> connection;
    {
      std::unique_lock lock(mutex_);
      ++idle_;
      cv_.wait(lock, [this] { return shutdown_ || !queue_.empty(); });
      --idle_;
      if (queue_.empty()) {
        return;
      }
      connection = std::move(queue_.front());
      queue_.pop_front();
    }
    serve_(std::move(connection));
  }
}

}  // namespace gvirtus
