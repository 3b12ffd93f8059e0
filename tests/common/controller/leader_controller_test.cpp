#include "common/controller/leader_controller.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <thread>

#include "support/cluster_env.h"

using gvirtus::ControllerOptions;
using gvirtus::LeaderController;
using gvirtus::Result;
using gvirtus::SyncResult;
using gvirtus::testing::eventually;
using namespace std::chrono_literals;

namespace {

struct Syncs {
  std::mutex mutex;
  std::map<std::string, int> counts;

  int of(const std::string& key) {
    std::lock_guard lock(mutex);
    return counts[key];
  }
};

}  // namespace

TEST_CASE("a leader controller looks at every key each term, and at nothing between terms",
          "[leader_controller]") {
  Syncs syncs;
  LeaderController leader(ControllerOptions{.name = "test", .syncPoll = 5ms},
                          [&](const std::string& key) -> Result<SyncResult> {
                            std::lock_guard lock(syncs.mutex);
                            ++syncs.counts[key];
                            return SyncResult{};
                          });
  std::atomic<bool> synced = false;
  auto enqueueAll = [&] {
    leader.enqueue("a");
    leader.enqueue("b");
  };
  // Between terms a change is dropped: the next term looks at every key anyway.
  leader.enqueue("between");

  for (int term = 1; term <= 2; ++term) {
    std::stop_source stop;
    // A key enqueued while the term waits for its caches is kept for the term.
    auto waitedFor = [&] {
      leader.enqueue("early");
      return synced.load();
    };
    std::jthread run(
        [&] { leader.run(stop.get_token(), {.synced = waitedFor, .enqueueAll = enqueueAll}); });
    synced = true;
    REQUIRE(eventually([&] { return syncs.of("a") == term && syncs.of("b") == term; }));
    // A change during the term is looked at.
    leader.enqueue("changed");
    REQUIRE(eventually([&] { return syncs.of("changed") == term; }));
    stop.request_stop();
    run.join();
    synced = false;
  }
  CHECK(syncs.of("between") == 0);
  CHECK(syncs.of("early") == 2);
}
