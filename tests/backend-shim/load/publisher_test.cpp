#include "backend-shim/load/publisher.h"

#include <catch2/catch.hpp>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/eventually.h"

using namespace gvirtus::backend_shim;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t kMiB = 1024 * 1024;

std::chrono::system_clock::time_point at(int year, int month, int day, int h, int m, int s) {
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = h;
  tm.tm_min = m;
  tm.tm_sec = s;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

Load sampleLoad(int connections) {
  return Load{connections, 16, {GpuInfo{0, 81920 * kMiB, 1024 * kMiB, 12, {}, {}}}};
}

// A patch function that records the bodies and fails while `failing` is true.
struct Recorder {
  std::vector<std::string> bodies;
  bool failing = false;
  LoadPublisher::PatchFn fn() {
    return [this](const std::string& body) -> gvirtus::Result<void> {
      if (failing) {
        return gvirtus::fail("the server said no", 500);
      }
      bodies.push_back(body);
      return {};
    };
  }
  nlohmann::json lastLoad() const {
    const auto patch = nlohmann::json::parse(bodies.back());
    return nlohmann::json::parse(
        patch["metadata"]["annotations"]["gvirtus.io/load"].get<std::string>());
  }
};

}  // namespace

TEST_CASE(
    "backend-shim load_publisher: the annotation value is documented format (docs/pod-contract.md)",
    "[load_publisher]") {
  CHECK(renderLoad(sampleLoad(3), at(2026, 11, 22, 10, 0, 0)) ==
        R"({"connections":3,"maxSessions":16,"gpus":[{"index":0,"memoryTotalMiB":81920,)"
        R"("memoryUsedMiB":1024,"utilization":12}],"updated":"2026-11-22T10:00:00Z"})");
  CHECK(renderLoad(Load{0, 4, {}}, at(2026, 1, 2, 3, 4, 5)) ==
        R"({"connections":0,"maxSessions":4,"gpus":[],"updated":"2026-01-02T03:04:05Z"})");
}

TEST_CASE("backend-shim load_publisher: the patch is a merge patch of the one annotation",
          "[load_publisher]") {
  const auto patch = nlohmann::json::parse(loadAnnotationPatch("{\"connections\":1}"));
  CHECK(patch == nlohmann::json::parse(
                     R"({"metadata":{"annotations":{"gvirtus.io/load":"{\"connections\":1}"}}})"));
}

TEST_CASE("backend-shim load_publisher: writes when the value changes, at most once per interval",
          "[load_publisher]") {
  Recorder recorder;
  auto wall = at(2026, 11, 22, 10, 0, 0);
  LoadPublisher publisher(recorder.fn(), 5s, [&wall] { return wall; });
  const auto t0 = LoadPublisher::Clock::time_point{} + 1h;

  CHECK_FALSE(publisher.publishIfDue(t0));  // nothing to say yet
  publisher.update(sampleLoad(0));
  CHECK(publisher.publishIfDue(t0));
  REQUIRE(recorder.bodies.size() == 1);
  CHECK(recorder.lastLoad()["connections"] == 0);
  CHECK(recorder.lastLoad()["updated"] == "2026-11-22T10:00:00Z");

  // The same numbers soon after: `updated` alone does not make a write...
  wall += 10s;
  publisher.update(sampleLoad(0));
  CHECK_FALSE(publisher.publishIfDue(t0 + 10s));
  // ...until 30 s have passed: then the unchanged load is written again as a heartbeat,
  // since the webhook takes a load older than a minute as unknown.
  wall += 20s;
  CHECK(publisher.publishIfDue(t0 + 30s));
  CHECK(recorder.lastLoad()["updated"] == "2026-11-22T10:00:30Z");

  // A change inside the interval waits for the interval's end.
  publisher.update(sampleLoad(2));
  const auto t1 = t0 + 1min;
  CHECK(publisher.publishIfDue(t1));
  publisher.update(sampleLoad(3));
  CHECK_FALSE(publisher.publishIfDue(t1 + 1s));
  CHECK_FALSE(publisher.publishIfDue(t1 + 4900ms));
  CHECK(publisher.publishIfDue(t1 + 5s));
  CHECK(recorder.lastLoad()["connections"] == 3);
  CHECK(recorder.bodies.size() == 4);

  // Changed and changed back within the interval: nothing to write.
  publisher.update(sampleLoad(4));
  publisher.update(sampleLoad(3));
  CHECK_FALSE(publisher.publishIfDue(t1 + 20s));
  CHECK(publisher.writes() == 4);
}

TEST_CASE("backend-shim load_publisher: looks at a steady load are counted once per interval",
          "[load_publisher]") {
  Recorder recorder;
  LoadPublisher publisher(recorder.fn(), 5s);
  const auto t0 = LoadPublisher::Clock::time_point{} + 1h;
  publisher.update(sampleLoad(1));
  REQUIRE(publisher.publishIfDue(t0));
  CHECK(publisher.unchanged() == 0);

  CHECK_FALSE(publisher.publishIfDue(t0 + 250ms));
  CHECK(publisher.unchanged() == 1);
  CHECK_FALSE(publisher.publishIfDue(t0 + 500ms));
  CHECK_FALSE(publisher.publishIfDue(t0 + 5s));
  CHECK(publisher.unchanged() == 1);  // one interval since the last one counted
  CHECK_FALSE(publisher.publishIfDue(t0 + 5250ms));
  CHECK(publisher.unchanged() == 2);

  // A change is written, not counted.
  publisher.update(sampleLoad(2));
  CHECK(publisher.publishIfDue(t0 + 11s));
  CHECK(publisher.unchanged() == 2);
  CHECK(publisher.writes() == 2);
}

TEST_CASE("backend-shim load_publisher: API errors are retried an interval later, never fatal",
          "[load_publisher]") {
  Recorder recorder;
  recorder.failing = true;
  LoadPublisher publisher(recorder.fn(), 2s);
  const auto t0 = LoadPublisher::Clock::time_point{} + 1h;
  publisher.update(sampleLoad(1));
  CHECK_FALSE(publisher.publishIfDue(t0));
  CHECK(publisher.failures() == 1);
  CHECK_FALSE(publisher.publishIfDue(t0 + 1s));  // not before the interval
  CHECK(publisher.failures() == 1);
  recorder.failing = false;
  CHECK(publisher.publishIfDue(t0 + 2s));
  CHECK(recorder.lastLoad()["connections"] == 1);
  CHECK(publisher.writes() == 1);
}

TEST_CASE("backend-shim load_publisher: MiB are whole MiB of the bytes NVML reports",
          "[load_publisher]") {
  Recorder recorder;
  LoadPublisher publisher(recorder.fn(), 1s);
  publisher.update(Load{1, 2, {GpuInfo{1, 3 * kMiB + 5, 2 * kMiB - 1, 100, {}, {}}}});
  REQUIRE(publisher.publishIfDue(LoadPublisher::Clock::now()));
  const auto gpu = recorder.lastLoad()["gpus"][0];
  CHECK(gpu["index"] == 1);
  CHECK(gpu["memoryTotalMiB"] == 3);
  CHECK(gpu["memoryUsedMiB"] == 1);
  CHECK(gpu["utilization"] == 100);
}

TEST_CASE("backend-shim load_publisher: run() publishes from its own thread until stopped",
          "[load_publisher]") {
  std::mutex mutex;
  int writes = 0;
  LoadPublisher publisher(
      [&](const std::string&) -> gvirtus::Result<void> {
        std::lock_guard lock(mutex);
        ++writes;
        return {};
      },
      100ms);
  std::jthread thread([&publisher](std::stop_token stop) { publisher.run(stop); });
  publisher.update(sampleLoad(1));
  REQUIRE(gvirtus::testing::eventually([&] { return publisher.writes() >= 1; }, 5s));
  publisher.update(sampleLoad(2));
  REQUIRE(gvirtus::testing::eventually([&] { return publisher.writes() >= 2; }, 5s));
  thread = {};
  CHECK(publisher.writes() == 2);
}
