// allocation_ledger.h: open addressing with linear probing, deletion by shifting back (no
// tombstones), the table kept at most three quarters full.
#include "backend-shim/peer_guard/allocation_ledger.h"

#include <sys/syscall.h>
#include <unistd.h>

namespace gvirtus::peer_guard {
namespace {

constexpr uint32_t kSlots = 1u << 16;
constexpr uint32_t kMaxLive = kSlots / 4 * 3;

struct Slot {
  uint64_t address;  // 0: empty (no allocation is at address 0)
  uint64_t bytes;
  uint64_t generation;  // which entry at this address (from 1)
};

Slot slots[kSlots];
uint32_t live = 0;      // slots in use
uint32_t inFlight = 0;  // Counted grants not settled yet
uint64_t heldBytes = 0;
uint64_t capBytes = 0;
uint64_t nextGeneration = 1;
bool locked = false;

class Lock {
 public:
  Lock() {
    while (__atomic_test_and_set(&locked, __ATOMIC_ACQUIRE)) {
      syscall(SYS_sched_yield);
    }
  }
  ~Lock() { __atomic_clear(&locked, __ATOMIC_RELEASE); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
};

uint32_t home(uint64_t address) {
  // Allocations are aligned: mix the high bits in before the low ones are taken.
  address ^= address >> 33;
  address *= 0xff51afd7ed558ccdULL;
  address ^= address >> 33;
  return static_cast<uint32_t>(address) & (kSlots - 1);
}

// The slot of `address`, or the empty slot where it would go.
uint32_t find(uint64_t address) {
  uint32_t at = home(address);
  while (slots[at].address != 0 && slots[at].address != address) {
    at = (at + 1) & (kSlots - 1);
  }
  return at;
}

void removeAt(uint32_t at) {
  heldBytes -= slots[at].bytes;
  slots[at] = {};
  --live;
  // Shift back the entries after it that would no longer be found past the hole.
  for (uint32_t next = (at + 1) & (kSlots - 1); slots[next].address != 0;
       next = (next + 1) & (kSlots - 1)) {
    const uint32_t want = home(slots[next].address);
    const bool reachable = at <= next ? (want > at && want <= next) : (want > at || want <= next);
    if (!reachable) {
      slots[at] = slots[next];
      slots[next] = {};
      at = next;
    }
  }
}

}  // namespace

Grant reserve(uint64_t bytes) {
  Lock lock;
  if (live + inFlight >= kMaxLive) {
    return capBytes != 0 ? Grant::Refused : Grant::Uncounted;
  }
  if (capBytes != 0 && (bytes > capBytes || heldBytes > capBytes - bytes)) {
    return Grant::Refused;
  }
  heldBytes += bytes;
  ++inFlight;
  return Grant::Counted;
}

bool settle(uint64_t reserved, uint64_t address, uint64_t bytes) {
  Lock lock;
  --inFlight;
  heldBytes -= reserved;
  if (address == 0) {
    return true;
  }
  const uint32_t at = find(address);
  if (slots[at].address == address) {
    // Counted before and freed since: by a free the guard did not see, or by one that has not
    // come back to forget() yet (which then leaves this new entry alone).
    removeAt(at);
  }
  if (capBytes != 0 && (bytes > capBytes || heldBytes > capBytes - bytes)) {
    return false;
  }
  slots[find(address)] = {address, bytes, nextGeneration++};
  heldBytes += bytes;
  ++live;
  return true;
}

uint64_t generationOf(uint64_t address) {
  if (address == 0) {
    return 0;
  }
  Lock lock;
  const uint32_t at = find(address);
  return slots[at].address == address ? slots[at].generation : 0;
}

void forget(uint64_t address, uint64_t generation) {
  if (address == 0 || generation == 0) {
    return;
  }
  Lock lock;
  const uint32_t at = find(address);
  if (slots[at].address == address && slots[at].generation == generation) {
    removeAt(at);
  }
}

void setCap(uint64_t bytes) {
  Lock lock;
  capBytes = bytes;
}

uint64_t cap() {
  Lock lock;
  return capBytes;
}

uint64_t held() {
  Lock lock;
  return heldBytes;
}

}  // namespace gvirtus::peer_guard
