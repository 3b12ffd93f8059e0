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
// After the allocation a Counted grant of `reserved` was made for: `address` 0 when it failed
// (the room is given back), else what it holds from now on (`bytes`). `bytes` may be more
// than was reserved (a pitched allocation's rows are padded by the driver): when the
// difference would pass the cap, nothing is counted and false is returned, and the caller
// frees the allocation and answers as if it had been refused.
bool settle(uint64_t reserved, uint64_t address, uint64_t bytes);
// Before a free: the entry of `address` as it is now (its generation; 0 when not counted).
// After the free succeeded, forget(address, generation) gives back what that entry held,
// unless another thread was given the same address meanwhile (the driver may hand out a
// freed address again at once): that new entry stays.
uint64_t generationOf(uint64_t address);
void forget(uint64_t address, uint64_t generation);

// The cap (0: none), and the bytes held now, counted and reserved.
void setCap(uint64_t bytes);
uint64_t cap();
uint64_t held();

}  // namespace gvirtus::peer_guard
