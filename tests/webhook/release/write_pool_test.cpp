// The pool that writes lone pods' release patches beside the controller's one worker
// (webhook/release/write_pool.h): every write submitted is made, several at once, and its
// result handed back, even when the pool is closed right after the submit.
#include "webhook/release/write_pool.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "webhook/fixtures.h"
#include "webhook/release_fixtures.h"

using namespace gvirtus::webhook;
using namespace gvirtus::webhook::testing;
using namespace gvirtus::webhook::release_testing;
using gvirtus::Error;
using gvirtus::JsonPatch;
using gvirtus::Result;

namespace {

PendingWrite pending(const std::string& name) {
  return {.unit = "team-a/" + name,
          .pod = std::make_shared<const json>(waitingPod(name, "2026-11-22T10:00:00Z")),
          .patch = {},
          .choice = {}};
}

}  // namespace

TEST_CASE("every write submitted is made and told, the last ones after the pool closes",
          "[waiting][writes]") {
  std::mutex mutex;
  std::map<std::string, bool> told;
  {
    WritePool pool(
        3,
        [](const json& pod, const JsonPatch&) -> Result<void> {
          if (pod["metadata"]["name"] == "refused") {
            return gvirtus::fail(Error{"admission webhook denied the request", 403, "Forbidden"});
          }
          return {};
        },
        [&](PendingWrite write, Result<void> result) {
          std::lock_guard lock(mutex);
          told[write.unit] = result.has_value();
        });
    for (int i = 0; i < 20; ++i) {
      pool.submit(pending("pod-" + std::to_string(i)));
    }
    pool.submit(pending("refused"));
  }  // closed: what was submitted is written first
  REQUIRE(told.size() == 21);
  CHECK_FALSE(told.at("team-a/refused"));
  CHECK(told.at("team-a/pod-0"));
  CHECK(told.at("team-a/pod-19"));
}

TEST_CASE("writes go several at a time: a slow one does not hold up the others",
          "[waiting][writes]") {
  std::mutex mutex;
  std::condition_variable changed;
  bool slowMayEnd = false;
  int done = 0;
  {
    WritePool pool(
        2,
        [&](const json& pod, const JsonPatch&) -> Result<void> {
          if (pod["metadata"]["name"] == "slow") {
            std::unique_lock lock(mutex);
            changed.wait(lock, [&] { return slowMayEnd; });
          }
          return {};
        },
        [&](PendingWrite, Result<void>) {
          std::lock_guard lock(mutex);
          ++done;
          changed.notify_all();
        });
    pool.submit(pending("slow"));
    for (int i = 0; i < 5; ++i) {
      pool.submit(pending("fast-" + std::to_string(i)));
    }
    // The five fast writes end while the slow one still waits, on the other thread.
    std::unique_lock lock(mutex);
    REQUIRE(changed.wait_for(lock, std::chrono::seconds(30), [&] { return done == 5; }));
    slowMayEnd = true;
    changed.notify_all();
  }
  CHECK(done == 6);
}
