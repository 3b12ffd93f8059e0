#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/time/duration.h"

namespace gvirtus::device_plugin {

// "vgpu-0", "vgpu-1", ...: the kubelet's device IDs of our virtual GPUs.
std::string deviceId(int64_t index);

struct VirtualDevice {
  std::string id;
  bool healthy = true;

  bool operator==(const VirtualDevice&) const = default;
};

// The virtual GPUs this node advertises, and their health. ListAndWatch streams wait
// here for changes; every change bumps the version. Thread-safe.
class DeviceList {
 public:
  // `count` healthy devices, vgpu-0 .. vgpu-<count-1>.
  explicit DeviceList(int64_t count);

  struct Snapshot {
    uint64_t version = 0;
    std::vector<VirtualDevice> devices;
  };
  Snapshot snapshot() const;
  // The IDs, in index order; they never change.
  const std::vector<std::string>& ids() const { return ids_; }

  // Marks a device healthy or not; a real change wakes the watchers.
  Result<void> setHealthy(const std::string& id, bool healthy);

  // Waits until the version is newer than `seen`, `abandon` (when given) is set and
  // wakeWaiters() called, or `timeout` passed. Returns the newest snapshot either way; the
  // caller compares versions.
  Snapshot waitForChange(uint64_t seen, Duration timeout,
                         const std::atomic<bool>* abandon = nullptr) const;
  // Makes every waiter look at its `abandon` flag now.
  void wakeWaiters() const;

 private:
  std::vector<std::string> ids_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  uint64_t version_ = 1;                // guarded by mutex_
  std::vector<VirtualDevice> devices_;  // guarded by mutex_
};

}  // namespace gvirtus::device_plugin
