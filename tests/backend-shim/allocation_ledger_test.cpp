// The guard's ledger of a session process's GPU memory (backend-shim/peer_guard), compiled
// into this test: its state is the process's, so each case works on addresses of its own and
// reads what changed.
#include "backend-shim/peer_guard/allocation_ledger.h"

#include <catch2/catch.hpp>

using namespace gvirtus::peer_guard;

namespace {

// Leaves the ledger without a cap, whatever a case did.
struct Capped {
  explicit Capped(uint64_t bytes) { setCap(bytes); }
  ~Capped() { setCap(0); }
};

}  // namespace

TEST_CASE("ledger: room is made before an allocation and given back after a free",
          "[allocation_ledger]") {
  const uint64_t before = held();
  Capped cap(before + 1000);
  REQUIRE(reserve(600) == Grant::Counted);
  // A second allocation made at the same time cannot take what the first was promised.
  CHECK(reserve(600) == Grant::Refused);
  CHECK(settle(600, 0x10000, 600));
  CHECK(held() == before + 600);
  REQUIRE(reserve(300) == Grant::Counted);
  CHECK(settle(300, 0, 0));  // the allocation failed: its room comes back
  CHECK(held() == before + 600);
  forget(0x10000, generationOf(0x10000));
  CHECK(held() == before);
  // A free of an address never counted gives nothing back.
  forget(0x20000, generationOf(0x20000));
  CHECK(held() == before);
}

TEST_CASE("ledger: an allocation that turns out larger than the cap leaves is not counted",
          "[allocation_ledger]") {
  const uint64_t before = held();
  Capped cap(before + 1000);
  REQUIRE(reserve(500) == Grant::Counted);
  // A pitched allocation's padded rows: 1,200 bytes where 500 were reserved.
  CHECK_FALSE(settle(500, 0x30000, 1200));
  CHECK(held() == before);
  CHECK(generationOf(0x30000) == 0);
}

TEST_CASE("ledger: an address given out again before its free comes back keeps its new entry",
          "[allocation_ledger]") {
  const uint64_t before = held();
  REQUIRE(reserve(100) == Grant::Counted);
  REQUIRE(settle(100, 0x40000, 100));
  // Thread 1 frees 0x40000; before it comes back, thread 2 is given 0x40000 for 700 bytes.
  const uint64_t freeing = generationOf(0x40000);
  REQUIRE(reserve(700) == Grant::Counted);
  REQUIRE(settle(700, 0x40000, 700));
  CHECK(held() == before + 700);
  forget(0x40000, freeing);  // thread 1's late forget leaves thread 2's allocation counted
  CHECK(held() == before + 700);
  forget(0x40000, generationOf(0x40000));
  CHECK(held() == before);
}

TEST_CASE("ledger: many live allocations, found and removed in any order", "[allocation_ledger]") {
  const uint64_t before = held();
  // Addresses 1 MiB apart, as a driver hands them out: they crowd the same slots.
  for (uint64_t i = 1; i <= 20000; ++i) {
    REQUIRE(reserve(i) == Grant::Counted);
    REQUIRE(settle(i, i << 20, i));
  }
  CHECK(held() == before + 20000ull * 20001 / 2);
  for (uint64_t i = 1; i <= 20000; i += 2) {
    forget(i << 20, generationOf(i << 20));
  }
  for (uint64_t i = 2; i <= 20000; i += 2) {
    REQUIRE(generationOf(i << 20) != 0);
  }
  for (uint64_t i = 2; i <= 20000; i += 2) {
    forget(i << 20, generationOf(i << 20));
  }
  CHECK(held() == before);
}
