#pragma once

#include <stdint.h>

// The GPU memory one session process holds, allocation by allocation (gpu_memory_cap.h): a
// fixed table of live allocations by address, so that a free subtracts what its allocation
// added. Static storage, no allocation; a spin lock, held only for a table operation, never
// across a call into CUDA.
namespace gvirtus::peer_guard {

enum class Grant {
  Counted,    // room made; settle() once the allocation returned
  Uncounted,  // no cap and a full table: it goes on, not counted
  Refused,    // past the cap, or a full table under a cap
};

// Makes room for `bytes` before the allocation is made: two threads allocating at once cannot
// both pass the cap.
Grant reserve(uint64_t bytes);
// After the allocation a Counted grant was made for: `address` 0 when it failed (the room is
// given back), else what it holds from now on (`bytes`, which may differ from what was
// reserved: a pitched allocation's padding).
void settle(uint64_t reserved, uint64_t address, uint64_t bytes);
// After a free that succeeded: what `address` held is given back (nothing when it was not
// counted).
void forget(uint64_t address);

// The cap (0: none), and the bytes held now, counted and reserved.
void setCap(uint64_t bytes);
uint64_t cap();
uint64_t held();

}  // namespace gvirtus::peer_guard
