#include "common/controller/work_queue.h"

#include <catch2/catch.hpp>
#include <thread>

using gvirtus::WorkQueue;
using namespace std::chrono_literals;

TEST_CASE("a key is held once however often it is added", "[work_queue]") {
  WorkQueue queue;
  queue.add("a");
  queue.add("a");
  queue.add("b");
  CHECK(queue.size() == 2);
  std::stop_source stop;
  CHECK(queue.get(stop.get_token()) == "a");
  CHECK(queue.get(stop.get_token()) == "b");
  CHECK(queue.size() == 0);
}

TEST_CASE("a key added while processing runs again after done, never concurrently",
          "[work_queue]") {
  WorkQueue queue;
  std::stop_source stop;
  queue.add("a");
  auto key = queue.get(stop.get_token());
  REQUIRE(key == "a");
  queue.add("a");
  CHECK(queue.size() == 0);  // held back until done()
  queue.done("a");
  CHECK(queue.size() == 1);
  CHECK(queue.get(stop.get_token()) == "a");
}

TEST_CASE("addAfter delivers no earlier than asked, and an earlier one overtakes", "[work_queue]") {
  WorkQueue queue;
  std::stop_source stop;
  const auto start = std::chrono::steady_clock::now();
  queue.addAfter("late", 400ms);
  std::jthread adder([&] {
    std::this_thread::sleep_for(50ms);
    queue.addAfter("early", 100ms);
  });
  CHECK(queue.get(stop.get_token()) == "early");
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(elapsed >= 150ms);
  CHECK(elapsed < 390ms);
  CHECK(queue.get(stop.get_token()) == "late");
  CHECK(std::chrono::steady_clock::now() - start >= 400ms);
}

TEST_CASE("rate-limited keys back off exponentially until forgotten", "[work_queue]") {
  WorkQueue queue(100ms, 1s);
  std::stop_source stop;
  auto timeOne = [&] {
    const auto start = std::chrono::steady_clock::now();
    queue.addRateLimited("k");
    auto key = queue.get(stop.get_token());
    queue.done(*key);
    return std::chrono::steady_clock::now() - start;
  };
  const auto first = timeOne();
  const auto second = timeOne();
  CHECK(first >= 70ms);    // 100ms +/- 20% jitter
  CHECK(second >= 140ms);  // 200ms +/- 20%
  queue.forget("k");
  CHECK(timeOne() < 150ms);
}

TEST_CASE("get returns nullopt on stop and on shutdown", "[work_queue]") {
  WorkQueue queue;
  std::stop_source stop;
  std::jthread stopper([&] {
    std::this_thread::sleep_for(50ms);
    stop.request_stop();
  });
  CHECK_FALSE(queue.get(stop.get_token()));
  WorkQueue other;
  std::stop_source never;
  std::jthread closer([&] {
    std::this_thread::sleep_for(50ms);
    other.shutDown();
  });
  CHECK_FALSE(other.get(never.get_token()));
}

TEST_CASE("a key waiting for its time waits once, for the earlier of two times", "[work_queue]") {
  WorkQueue queue;
  std::stop_source stop;
  queue.addAfter("k", std::chrono::hours(1));
  queue.addAfter("k", 10ms);                   // earlier: replaces the hour
  queue.addAfter("k", std::chrono::hours(2));  // later: changes nothing
  CHECK(queue.size() == 1);
  CHECK(queue.get(stop.get_token()) == "k");
  queue.done("k");
  CHECK(queue.size() == 0);  // the hour-long entry is gone with it
}
