/* libcudart.so.12 of the GVirtuS stand-in image (Dockerfile.gvirtus-standin): the runtime's
 * allocation calls over one GPU of 16 GiB that only counts (no CUDA runs), so that the
 * stand-in backend's "standin cuda ..." commands make the calls GVirtuS's cudart plugin
 * makes, and the shim's guard, preloaded, can cap them per pod as it caps the real ones.
 * cudaError_t is an int here: 0 success, 1 invalid value, 2 out of memory. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define TOTAL (16ull << 30)
#define MAX_ALLOCATIONS 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t addresses[MAX_ALLOCATIONS];
static uint64_t sizes[MAX_ALLOCATIONS];
static uint64_t used = 0;
static uint64_t next_address = 0x7f0000000000ull;

int cudaMalloc(void** pointer, size_t bytes) {
  int result = 2;
  pthread_mutex_lock(&lock);
  *pointer = NULL;
  for (int i = 0; i < MAX_ALLOCATIONS && bytes <= TOTAL - used; ++i) {
    if (addresses[i] == 0) {
      addresses[i] = next_address;
      sizes[i] = bytes;
      used += bytes;
      *pointer = (void*)(uintptr_t)next_address;
      next_address += ((bytes + 0xfffff) & ~0xfffffull) + (1ull << 20);
      result = 0;
      break;
    }
  }
  pthread_mutex_unlock(&lock);
  return result;
}

int cudaFree(void* pointer) {
  const uint64_t address = (uint64_t)(uintptr_t)pointer;
  int result = address == 0 ? 0 : 1;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_ALLOCATIONS && address != 0; ++i) {
    if (addresses[i] == address) {
      used -= sizes[i];
      addresses[i] = 0;
      result = 0;
      break;
    }
  }
  pthread_mutex_unlock(&lock);
  return result;
}

int cudaMemGetInfo(size_t* free, size_t* total) {
  pthread_mutex_lock(&lock);
  *free = (size_t)(TOTAL - used);
  *total = (size_t)TOTAL;
  pthread_mutex_unlock(&lock);
  return 0;
}
