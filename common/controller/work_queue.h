#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>

#include "common/time/backoff.h"
#include "common/time/duration.h"

namespace gvirtus {

// The key queue of a controller (sample-controller's workqueue shape): a key is held at
// most once, a key being processed and added again is processed again after done(), and
// failing keys come back with a per-key exponential backoff.
class WorkQueue {
 public:
  explicit WorkQueue(Duration initialBackoff = std::chrono::milliseconds(800),
                     Duration maxBackoff = std::chrono::seconds(30));

  void add(const std::string& key);
  // A key already waiting keeps the earlier of its two times.
  void addAfter(const std::string& key, Duration delay);
  // Adds after this key's next backoff step.
  void addRateLimited(const std::string& key);
  // Resets the key's backoff (after a successful sync).
  void forget(const std::string& key);
  // Blocks until a key is ready, or returns nullopt once stopped or shut down.
  std::optional<std::string> get(std::stop_token stop);
  // Must follow every get() that returned a key.
  void done(const std::string& key);
  void shutDown();
  size_t size() const;

 private:
  using Clock = std::chrono::steady_clock;
  void enqueueLocked(const std::string& key);

  Duration initialBackoff_;
  Duration maxBackoff_;
  mutable std::mutex mutex_;
  std::condition_variable_any ready_;
  std::deque<std::string> queue_;
  std::set<std::string> dirty_;       // queued, or waiting to be requeued after done()
  std::set<std::string> processing_;  // handed out by get()
  std::multimap<Clock::time_point, std::string> delayed_;
  std::map<std::string, Clock::time_point> delayedAt_;  // the entry of each key in delayed_
  std::map<std::string, Backoff> backoffs_;
  bool shutDown_ = false;
  // Bumped by addAfter() so that a waiter sleeping until a later deadline wakes up.
  uint64_t delayedGeneration_ = 0;
};

}  // namespace gvirtus
