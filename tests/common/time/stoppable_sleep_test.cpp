#include "common/time/stoppable_sleep.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

using gvirtus::sleepUnlessStopped;
using namespace std::chrono_literals;

TEST_CASE("a sleep runs its course unless stopped", "[stoppable-sleep]") {
  std::stop_source source;
  CHECK(sleepUnlessStopped(source.get_token(), 1ms));
  source.request_stop();
  CHECK_FALSE(sleepUnlessStopped(source.get_token(), 1ms));
}

TEST_CASE("a stop request ends a long sleep", "[stoppable-sleep]") {
  std::stop_source source;
  std::jthread stopper([&] {
    std::this_thread::sleep_for(20ms);
    source.request_stop();
  });
  // An hour-long sleep returning at all shows the stop woke it.
  CHECK_FALSE(sleepUnlessStopped(source.get_token(), std::chrono::hours(1)));
}
