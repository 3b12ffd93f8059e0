#include "backend-shim/peers/refusal_log.h"

namespace gvirtus::backend_shim {

RefusalLog::RefusalLog(Duration interval, size_t maxAddresses)
    : interval_(interval), maxAddresses_(maxAddresses) {}

std::optional<int64_t> RefusalLog::admit(const std::string& address, Clock::time_point now) {
  if (auto it = entries_.find(address); it != entries_.end()) {
    Entry& entry = it->second;
    if (now - entry.logged < interval_) {
      ++entry.notLogged;
      return std::nullopt;
    }
    const int64_t notLogged = entry.notLogged;
    entry = Entry{now, 0};
    return notLogged;
  }
  if (entries_.size() >= maxAddresses_) {
    // Addresses quiet for an interval need no memory; if every one is recent, the memory
    // starts over (some repeated lines, never an unbounded map).
    std::erase_if(entries_,
                  [&](const auto& item) { return now - item.second.logged >= interval_; });
    if (entries_.size() >= maxAddresses_) {
      entries_.clear();
    }
  }
  entries_.emplace(address, Entry{now, 0});
  return 0;
}

}  // namespace gvirtus::backend_shim
