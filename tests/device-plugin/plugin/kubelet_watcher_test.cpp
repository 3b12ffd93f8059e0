#include "device-plugin/plugin/kubelet_watcher.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <functional>
#include <thread>

#include "device-plugin/dp_test_support.h"

using namespace gvirtus::device_plugin;
using namespace std::chrono_literals;
using test::TempDir;

namespace {

void touch(const std::filesystem::path& path) {
  std::ofstream(path) << "";
}

// Waits, merging what each wait reports, until `done` holds or two seconds pass: the
// kernel may hand over one change's events in more than one read.
KubeletWatcher::Events collect(KubeletWatcher& watcher,
                               const std::function<bool(const KubeletWatcher::Events&)>& done) {
  KubeletWatcher::Events all;
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  std::stop_source stop;
  while (!done(all) && std::chrono::steady_clock::now() < deadline) {
    auto events = watcher.wait(100ms, stop.get_token());
    REQUIRE(events.has_value());
    all.kubeletSocketCreated |= events->kubeletSocketCreated;
    all.kubeletSocketRemoved |= events->kubeletSocketRemoved;
    all.pluginSocketRemoved |= events->pluginSocketRemoved;
    all.overflow |= events->overflow;
  }
  return all;
}

}  // namespace

TEST_CASE("the watcher reports what a kubelet restart does", "[device-plugin][watcher]") {
  TempDir dir;
  touch(dir.file("plugin.sock"));
  auto watcher = KubeletWatcher::open(dir.path(), "plugin.sock");
  REQUIRE(watcher.has_value());
  std::stop_source stop;

  SECTION("nothing happens: a timeout with no events") {
    auto events = watcher->wait(20ms, stop.get_token());
    REQUIRE(events.has_value());
    CHECK_FALSE(events->any());
  }
  SECTION("our socket deleted, kubelet.sock created") {
    std::filesystem::remove(dir.file("plugin.sock"));
    touch(dir.file("kubelet.sock"));
    auto events = collect(
        *watcher, [](const auto& e) { return e.pluginSocketRemoved && e.kubeletSocketCreated; });
    CHECK(events.pluginSocketRemoved);
    CHECK(events.kubeletSocketCreated);
    CHECK_FALSE(events.kubeletSocketRemoved);
    CHECK_FALSE(events.overflow);
  }
  SECTION("kubelet.sock removed, and renamed into place") {
    touch(dir.file("kubelet.sock"));
    REQUIRE(watcher->wait(2s, stop.get_token()).has_value());
    std::filesystem::remove(dir.file("kubelet.sock"));
    auto events = watcher->wait(2s, stop.get_token());
    REQUIRE(events.has_value());
    CHECK(events->kubeletSocketRemoved);
    CHECK_FALSE(events->pluginSocketRemoved);
    touch(dir.file("staging"));
    REQUIRE(watcher->wait(2s, stop.get_token()).has_value());
    std::filesystem::rename(dir.file("staging"), dir.file("kubelet.sock"));
    events = watcher->wait(2s, stop.get_token());
    REQUIRE(events.has_value());
    CHECK(events->kubeletSocketCreated);
  }
  SECTION("other files are not events") {
    touch(dir.file("other.sock"));
    std::filesystem::remove(dir.file("other.sock"));
    auto events = watcher->wait(50ms, stop.get_token());
    REQUIRE(events.has_value());
    CHECK_FALSE(events->any());
  }
  SECTION("a stop request ends the wait at once") {
    std::jthread stopper([&] {
      std::this_thread::sleep_for(50ms);
      stop.request_stop();
    });
    const auto start = std::chrono::steady_clock::now();
    auto events = watcher->wait(10s, stop.get_token());
    REQUIRE(events.has_value());
    CHECK_FALSE(events->any());
    CHECK(std::chrono::steady_clock::now() - start < 5s);
  }
  SECTION("a folder removed and made again is watched again") {
    std::filesystem::remove_all(dir.path());
    CHECK(collect(*watcher, [](const auto& e) { return e.overflow; }).overflow);
    std::filesystem::create_directory(dir.path());
    auto events = watcher->wait(50ms, stop.get_token());
    REQUIRE(events.has_value());
    CHECK(events->overflow);
    touch(dir.file("kubelet.sock"));
    events = watcher->wait(2s, stop.get_token());
    REQUIRE(events.has_value());
    CHECK(events->kubeletSocketCreated);
  }
}

TEST_CASE("a missing folder cannot be watched", "[device-plugin][watcher]") {
  auto watcher = KubeletWatcher::open("/nonexistent/device-plugins", "plugin.sock");
  REQUIRE_FALSE(watcher.has_value());
  CHECK_THAT(watcher.error().message, Catch::Contains("/nonexistent/device-plugins"));
}
