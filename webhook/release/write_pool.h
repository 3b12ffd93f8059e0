#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/base/error.h"
#include "webhook/release/pass.h"

// The release patches of lone pods, written by a few threads while the waiting-pod
// controller's one worker goes on choosing (kube-scheduler's binding cycle beside its
// scheduling cycle). A PATCH waits milliseconds for the API server: written one at a time,
// releases stay near 150 pods/s (tests/bench/controller_bench); chosen on several workers
// at once, pods would take backends out of their order.
namespace gvirtus::webhook {

// A release chosen and not written yet.
struct PendingWrite {
  std::string unit;  // the release unit's key (the pod's)
  ObjectSnapshot pod;
  JsonPatch patch;
  Choice choice;
};

class WritePool {
 public:
  // Called on a pool thread once a write has returned; must be safe to call concurrently.
  using Written = std::function<void(PendingWrite, Result<void>)>;

  WritePool(size_t threads, ReleaseWriter write, Written written);
  // Writes everything submitted (a release chosen is finished, even when its term ends: the
  // patch's test operations refuse a pod changed since), then joins the threads.
  ~WritePool();
  WritePool(const WritePool&) = delete;
  WritePool& operator=(const WritePool&) = delete;

  void submit(PendingWrite write);

 private:
  void work();

  const ReleaseWriter write_;
  const Written written_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<PendingWrite> queue_;
  bool closing_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gvirtus::webhook
