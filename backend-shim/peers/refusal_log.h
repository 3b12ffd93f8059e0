#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/time/duration.h"

namespace gvirtus::backend_shim {

// Which of the gate's refusals get a log line: the first of each address, then at most one
// per interval with the count of those not logged, so that a flood from one address is a
// line now and then, not a line per connection. Not thread-safe (the gate's thread only).
class RefusalLog {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RefusalLog(Duration interval = std::chrono::seconds(10), size_t maxAddresses = 4096);

  // For a refusal of `address` at `now`: the refusals of it not logged since its last line
  // when this one is to be logged, nullopt when it is not.
  std::optional<int64_t> admit(const std::string& address, Clock::time_point now);

 private:
  struct Entry {
    Clock::time_point logged;
    int64_t notLogged = 0;
  };
  Duration interval_;
  size_t maxAddresses_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace gvirtus::backend_shim
