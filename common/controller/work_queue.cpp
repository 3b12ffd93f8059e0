#include "common/controller/work_queue.h"

namespace gvirtus {

WorkQueue::WorkQueue(Duration initialBackoff, Duration maxBackoff)
    : initialBackoff_(initialBackoff), maxBackoff_(maxBackoff) {}

void WorkQueue::enqueueLocked(const std::string& key) {
  if (shutDown_ || dirty_.contains(key)) {
    return;
  }
  dirty_.insert(key);
  // A key being processed is queued again by done(), so one key never runs twice at once.
  if (!processing_.contains(key)) {
    queue_.push_back(key);
    ready_.notify_one();
  }
}

void WorkQueue::add(const std::string& key) {
  std::lock_guard lock(mutex_);
  enqueueLocked(key);
}

void WorkQueue::addAfter(const std::string& key, Duration delay) {
  if (delay.count() <= 0) {
    add(key);
    return;
  }
  std::lock_guard lock(mutex_);
  if (shutDown_) {
    return;
  }
  const auto at = Clock::now() + delay;
  // One delayed entry per key, at the earliest time asked for (client-go's delaying
  // queue): a resync asked for after every sync does not pile up.
  if (auto it = delayedAt_.find(key); it != delayedAt_.end()) {
    if (it->second <= at) {
      return;
    }
    auto [first, last] = delayed_.equal_range(it->second);
    for (auto entry = first; entry != last; ++entry) {
      if (entry->second == key) {
        delayed_.erase(entry);
        break;
      }
    }
  }
  delayed_.emplace(at, key);
  delayedAt_[key] = at;
  ++delayedGeneration_;
  ready_.notify_all();
}

void WorkQueue::addRateLimited(const std::string& key) {
  Duration delay;
  {
    std::lock_guard lock(mutex_);
    auto it = backoffs_.find(key);
    if (it == backoffs_.end()) {
      it = backoffs_.emplace(key, Backoff(initialBackoff_, maxBackoff_)).first;
    }
    delay = it->second.next();
  }
  addAfter(key, delay);
}

void WorkQueue::forget(const std::string& key) {
  std::lock_guard lock(mutex_);
  backoffs_.erase(key);
}

std::optional<std::string> WorkQueue::get(std::stop_token stop) {
  std::unique_lock lock(mutex_);
  while (true) {
    // Move delayed keys whose time has come into the queue.
    const auto now = Clock::now();
    while (!delayed_.empty() && delayed_.begin()->first <= now) {
      std::string key = delayed_.begin()->second;
      delayed_.erase(delayed_.begin());
      delayedAt_.erase(key);
      enqueueLocked(key);
    }
    if (shutDown_ || stop.stop_requested()) {
      return std::nullopt;
    }
    if (!queue_.empty()) {
      std::string key = std::move(queue_.front());
      queue_.pop_front();
      dirty_.erase(key);
      processing_.insert(key);
      return key;
    }
    if (delayed_.empty()) {
      ready_.wait(lock, stop, [&] { return shutDown_ || !queue_.empty() || !delayed_.empty(); });
    } else {
      const uint64_t generation = delayedGeneration_;
      ready_.wait_until(lock, stop, delayed_.begin()->first, [&] {
        return shutDown_ || !queue_.empty() || delayedGeneration_ != generation;
      });
    }
  }
}

void WorkQueue::done(const std::string& key) {
  std::lock_guard lock(mutex_);
  processing_.erase(key);
  if (dirty_.contains(key)) {
    queue_.push_back(key);
    ready_.notify_one();
  }
}

void WorkQueue::shutDown() {
  std::lock_guard lock(mutex_);
  shutDown_ = true;
  ready_.notify_all();
}

size_t WorkQueue::size() const {
  std::lock_guard lock(mutex_);
  return queue_.size() + delayed_.size();
}

}  // namespace gvirtus
