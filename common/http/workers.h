#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/http/connection.h"

// The workers of an HttpServer: a fixed pool of threads with a bounded wait queue, for
// requests that have arrived whole. Internal to HttpServer.
namespace gvirtus {

class HttpWorkers {
 public:
  using Serve = std::function<void(std::unique_ptr<HttpConnection>)>;

  // At least one worker; `serve` runs on them.
  HttpWorkers(size_t workers, size_t maxQueued, Serve serve);
  ~HttpWorkers();
  HttpWorkers(const HttpWorkers&) = delete;
  HttpWorkers& operator=(const HttpWorkers&) = delete;

  // False, leaving `connection` with the caller, when the queue is full or shutting down.
  bool submit(std::unique_ptr<HttpConnection>& connection);
  // Every worker is busy and maxQueued requests wait.
  bool full();
  // Nothing waits and another worker is idle: the caller's worker may stay on its
  // connection a moment without delaying anyone.
  bool spare();
  // Closes the connections still queued and joins the workers.
  void shutdown();

 private:
  bool fullLocked() const;
  void work();

  const size_t maxQueued_;
  Serve serve_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<HttpConnection>> queue_;
  size_t idle_ = 0;
  bool shutdown_ = false;
  std::vector<std::jthread> threads_;
};

}  // namespace gvirtus
