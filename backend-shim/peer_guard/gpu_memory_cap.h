#pragma once

#include <stdint.h>

// A per-pod session process's share of GPU memory, enforced inside the process (issue 52,
// item 3). The guard stands in for the CUDA runtime's and driver's allocation calls
// (cudaMalloc, cudaMallocManaged, cudaMallocPitch, cudaMallocAsync, cuMemAlloc_v2,
// cuMemAllocManaged, cuMemAllocPitch_v2, cuMemAllocAsync) and frees, and counts what each
// allocation holds until it is freed. Once a cap is set, an allocation that would take the
// process past it is answered with cudaErrorMemoryAllocation (CUDA_ERROR_OUT_OF_MEMORY, the
// same number) without reaching the runtime, and cudaMemGetInfo/cuMemGetInfo_v2 report the
// share as the total and what is left of it as free, so that a framework sizes its pools to
// it. Without a cap, every call passes straight on (allocations are still counted, so a cap
// set later counts them).
//
// A pitched allocation counts what the driver made of it (its padded rows): one that turns
// out to pass the cap is freed and refused. Where it cannot count (more than 49,152
// allocations live at once) an allocation is refused while a cap is set: the cap fails closed.
// Not counted: CUDA arrays, the device heap and stack (cudaDeviceSetLimit), the virtual memory
// API (cuMemCreate), memory pools' own reserve beyond what was asked of them, and libraries
// that link the runtime statically (docs/backend.md).
namespace gvirtus::peer_guard {

// The pod's share in bytes; 0: none. Set by the handoff (kLimits), before the pod's first
// connection is handed to the process.
void setMemoryCap(uint64_t bytes);

}  // namespace gvirtus::peer_guard
