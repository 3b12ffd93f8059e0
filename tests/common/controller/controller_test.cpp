#include "common/controller/controller.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <thread>

#include "support/cluster_env.h"
#include "support/fake_object_cache.h"
#include "support/manual_clock.h"

using gvirtus::Controller;
using gvirtus::ControllerOptions;
using gvirtus::fail;
using gvirtus::Result;
using gvirtus::SyncResult;
using gvirtus::testing::eventually;
using gvirtus::testing::FakeObjectCache;
using gvirtus::testing::ManualClock;
using namespace std::chrono_literals;

namespace {

// Counts the syncs of each key; `answer` decides each one's outcome from its number (1 is
// the first sync of that key).
struct SyncLog {
  std::function<Result<SyncResult>(const std::string& key, int n)> answer =
      [](const std::string&, int) -> Result<SyncResult> { return SyncResult{}; };
  std::mutex mutex;
  std::map<std::string, int> counts;

  gvirtus::SyncFunction function() {
    return [this](const std::string& key) {
      int n = 0;
      {
        std::lock_guard lock(mutex);
        n = ++counts[key];
      }
      return answer(key, n);
    };
  }
  int count(const std::string& key) {
    std::lock_guard lock(mutex);
    return counts[key];
  }
};

nlohmann::json object(const std::string& ns, const std::string& name) {
  return {{"metadata", {{"namespace", ns}, {"name", name}, {"resourceVersion", "1"}}}};
}

}  // namespace

TEST_CASE("controller: no sync before the caches have synced, then each key once", "[controller]") {
  ManualClock clock;
  FakeObjectCache cache;
  SyncLog log;
  Controller controller({.name = "test", .workers = 2, .clock = &clock}, log.function());
  cache.addHandlers(controller.enqueueObjects());
  cache.holdSync(true);
  cache.start();
  cache.put(object("a", "one"));
  cache.put(object("a", "two"));
  cache.put(object("a", "two"));  // an update of a key already queued adds nothing

  std::jthread loop(
      [&](std::stop_token stop) { controller.run(stop, [&] { return cache.hasSynced(); }); });
  REQUIRE(clock.waitForSleeps(1));  // run() looked, found the cache not synced, and waits
  CHECK(log.count("a/one") == 0);
  CHECK(controller.queued() == 2);

  cache.holdSync(false);
  clock.advance(100ms);
  REQUIRE(eventually([&] { return log.count("a/one") == 1 && log.count("a/two") == 1; }, 5s));
  CHECK(eventually([&] { return controller.queued() == 0; }, 5s));
  CHECK(clock.sleeps() == std::vector<gvirtus::Duration>{100ms});

  cache.remove("a", "one");  // a delete is synced too: the sync finds the object gone
  CHECK(eventually([&] { return log.count("a/one") == 2; }, 5s));
}

TEST_CASE("controller: a failed sync comes back with backoff until it succeeds", "[controller]") {
  SyncLog log;
  log.answer = [](const std::string&, int n) -> Result<SyncResult> {
    if (n == 1) {
      return fail("the API server is away");
    }
    if (n == 2) {
      return fail("the object changed", 409);  // a conflict: retried as well, quietly
    }
    return SyncResult{};
  };
  Controller controller({.name = "test", .backoffInitial = 1ms, .backoffMax = 10ms},
                        log.function());
  controller.enqueue("k");
  std::jthread loop([&](std::stop_token stop) { controller.run(stop); });
  REQUIRE(eventually([&] { return log.count("k") == 3; }, 5s));
  // Success forgot the key: nothing is left waiting for it.
  CHECK(eventually([&] { return controller.queued() == 0; }, 5s));
  CHECK(log.count("k") == 3);
}

TEST_CASE("controller: a sync that asks for requeueAfter runs again after it", "[controller]") {
  SyncLog log;
  log.answer = [](const std::string&, int n) -> Result<SyncResult> {
    return SyncResult{.requeueAfter =
                          n == 1 ? std::optional<gvirtus::Duration>(20ms) : std::nullopt};
  };
  Controller controller({.name = "test"}, log.function());
  controller.enqueue("pass");
  std::jthread loop([&](std::stop_token stop) { controller.run(stop); });
  REQUIRE(eventually([&] { return log.count("pass") == 2; }, 5s));
  CHECK(eventually([&] { return controller.queued() == 0; }, 5s));
}

TEST_CASE("controller: one key never syncs on two workers at once", "[controller]") {
  std::atomic<int> inside = 0;
  std::atomic<int> mostInside = 0;
  std::atomic<int> syncs = 0;
  Controller controller({.name = "test", .workers = 4},
                        [&](const std::string&) -> Result<SyncResult> {
                          const int now = ++inside;
                          int seen = mostInside.load();
                          while (now > seen && !mostInside.compare_exchange_weak(seen, now)) {
                          }
                          std::this_thread::sleep_for(2ms);  // a sync that takes a while
                          --inside;
                          ++syncs;
                          return SyncResult{};
                        });
  std::jthread loop([&](std::stop_token stop) { controller.run(stop); });
  for (int i = 0; i < 200; ++i) {
    controller.enqueue("same");
    std::this_thread::sleep_for(100us);
  }
  REQUIRE(eventually([&] { return controller.queued() == 0 && inside == 0; }, 5s));
  CHECK(mostInside == 1);
  // Adds while a sync runs fold into one more sync, not one each.
  CHECK(syncs >= 2);
  CHECK(syncs < 200);
}

TEST_CASE("controller: run() returns at once when stopped while waiting for the caches",
          "[controller]") {
  ManualClock clock;
  SyncLog log;
  Controller controller({.name = "test", .clock = &clock}, log.function());
  controller.enqueue("k");
  std::stop_source stop;
  std::jthread loop([&] { controller.run(stop.get_token(), [] { return false; }); });
  REQUIRE(clock.waitForSleeps(1));
  stop.request_stop();
  loop.join();
  CHECK(log.count("k") == 0);
}
