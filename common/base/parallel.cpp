#include "common/base/parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace gvirtus {

void forEachParallel(size_t count, size_t parallel, const std::function<void(size_t)>& body) {
  std::atomic<size_t> next = 0;
  auto work = [&] {
    for (size_t i = next++; i < count; i = next++) {
      body(i);
    }
  };
  std::vector<std::jthread> helpers;
  for (size_t t = 1; t < std::min(parallel, count); ++t) {
    helpers.emplace_back(work);
  }
  work();
}

}  // namespace gvirtus
