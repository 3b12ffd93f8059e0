#pragma once

#include <cstddef>
#include <functional>

namespace gvirtus {

// Calls body(i) for every i in [0, count), on up to `parallel` threads at once (the calling
// thread among them), and returns when all calls have returned. For a few blocking calls
// (API writes) that need not wait for each other; `body` must be safe to call concurrently
// and must not throw. parallel <= 1 runs them in order on the calling thread.
void forEachParallel(size_t count, size_t parallel, const std::function<void(size_t)>& body);

}  // namespace gvirtus
