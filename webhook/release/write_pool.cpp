#include "webhook/release/write_pool.h"

#include <algorithm>

namespace gvirtus::webhook {

WritePool::WritePool(size_t threads, ReleaseWriter write, Written written)
    : write_(std::move(write)), written_(std::move(written)) {
  threads_.reserve(std::max<size_t>(threads, 1));
  for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i) {
    threads_.emplace_back([this] { work(); });
  }
}

WritePool::~WritePool() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  ready_.notify_all();
  for (auto& thread : threads_) {
    thread.join();
  }
}

void WritePool::submit(PendingWrite write) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(write));
  }
  ready_.notify_one();
}

void WritePool::work() {
  for (;;) {
    PendingWrite next;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) {
        return;  // closing, and nothing left to write
      }
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    Result<void> result = write_(*next.pod, next.patch);
    written_(std::move(next), std::move(result));
  }
}

}  // namespace gvirtus::webhook
