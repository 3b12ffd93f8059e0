#include "common/time/rate_limiter.h"

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

namespace gvirtus {
namespace {

using Clock = RateLimiter::Clock;
using std::chrono::milliseconds;

struct FakeClock {
  Clock::time_point now{};
  std::function<Clock::time_point()> fn() {
    return [this] { return now; };
  }
};

TEST_CASE("rate limiter allows a burst, then qps", "[rate_limiter]") {
  FakeClock clock;
  RateLimiter limiter(10, 3, clock.fn());
  CHECK(limiter.reserve() == Clock::duration::zero());
  CHECK(limiter.reserve() == Clock::duration::zero());
  CHECK(limiter.reserve() == Clock::duration::zero());
  // The bucket is empty: each next token is 100ms further away.
  CHECK(limiter.reserve() == milliseconds(100));
  CHECK(limiter.reserve() == milliseconds(200));
  clock.now += milliseconds(200);
  CHECK(limiter.reserve() == milliseconds(100));
  // A long pause refills at most `burst` tokens.
  clock.now += std::chrono::seconds(60);
  CHECK(limiter.tryAcquire());
  CHECK(limiter.tryAcquire());
  CHECK(limiter.tryAcquire());
  CHECK_FALSE(limiter.tryAcquire());
  clock.now += milliseconds(100);
  CHECK(limiter.tryAcquire());
  CHECK_FALSE(limiter.tryAcquire());
}

TEST_CASE("rate limiter with qps 0 is unlimited", "[rate_limiter]") {
  FakeClock clock;
  RateLimiter limiter(0, 1, clock.fn());
  CHECK(limiter.unlimited());
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(limiter.reserve() == Clock::duration::zero());
  }
  CHECK(limiter.tryAcquire());
}

TEST_CASE("rate limiter burst below 1 counts as 1", "[rate_limiter]") {
  FakeClock clock;
  RateLimiter limiter(4, 0, clock.fn());
  CHECK(limiter.reserve() == Clock::duration::zero());
  CHECK(limiter.reserve() == milliseconds(250));
}

TEST_CASE("rate limiter acquire really waits, across threads", "[rate_limiter]") {
  RateLimiter limiter(50, 1);  // one token every 20ms
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 3; ++i) {
        limiter.acquire();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  // 12 tokens, one free: at least 11 * 20ms.
  CHECK(Clock::now() - start >= milliseconds(200));
}

}  // namespace
}  // namespace gvirtus
