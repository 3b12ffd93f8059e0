#include "common/base/parallel.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

using gvirtus::forEachParallel;

TEST_CASE("forEachParallel calls every index once, at most `parallel` at a time", "[parallel]") {
  std::mutex mutex;
  std::vector<int> calls(40, 0);
  int inside = 0;
  int mostInside = 0;
  forEachParallel(calls.size(), 4, [&](size_t i) {
    {
      std::lock_guard lock(mutex);
      ++calls[i];
      mostInside = std::max(mostInside, ++inside);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard lock(mutex);
    --inside;
  });
  CHECK(calls == std::vector<int>(40, 1));
  CHECK(mostInside <= 4);
  CHECK(mostInside >= 2);
}

TEST_CASE("forEachParallel with one at a time runs in order on the caller's thread", "[parallel]") {
  std::vector<size_t> order;
  const auto caller = std::this_thread::get_id();
  bool elsewhere = false;
  forEachParallel(5, 1, [&](size_t i) {
    order.push_back(i);
    elsewhere = elsewhere || std::this_thread::get_id() != caller;
  });
  CHECK(order == std::vector<size_t>{0, 1, 2, 3, 4});
  CHECK_FALSE(elsewhere);
  forEachParallel(0, 8, [&](size_t) { order.clear(); });
  CHECK(order.size() == 5);
}
