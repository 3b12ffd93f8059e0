#include "device-plugin/plugin/device_list.h"

#include <algorithm>

namespace gvirtus::device_plugin {

std::string deviceId(int64_t index) {
  return "vgpu-" + std::to_string(index);
}

DeviceList::DeviceList(int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    ids_.push_back(deviceId(i));
    devices_.push_back(VirtualDevice{ids_.back(), true});
  }
}

DeviceList::Snapshot DeviceList::snapshot() const {
  std::lock_guard lock(mutex_);
  return Snapshot{version_, devices_};
}

Result<void> DeviceList::setHealthy(const std::string& id, bool healthy) {
  {
    std::lock_guard lock(mutex_);
    auto it = std::ranges::find(devices_, id, &VirtualDevice::id);
    if (it == devices_.end()) {
      return fail("unknown device \"" + id + "\"");
    }
    if (it->healthy == healthy) {
      return {};
    }
    it->healthy = healthy;
    ++version_;
  }
  changed_.notify_all();
  return {};
}

DeviceList::Snapshot DeviceList::waitForChange(uint64_t seen, Duration timeout,
                                               const std::atomic<bool>* abandon) const {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout,
                    [&] { return version_ > seen || (abandon != nullptr && abandon->load()); });
  return Snapshot{version_, devices_};
}

void DeviceList::wakeWaiters() const {
  // Taking the lock orders this wake-up after a waiter's check of its flag.
  { std::lock_guard lock(mutex_); }
  changed_.notify_all();
}

}  // namespace gvirtus::device_plugin
