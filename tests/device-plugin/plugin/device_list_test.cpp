#include "device-plugin/plugin/device_list.h"

#include <catch2/catch.hpp>
#include <thread>

using namespace gvirtus::device_plugin;
using namespace std::chrono_literals;

TEST_CASE("a device list starts with every device healthy", "[device-plugin][devices]") {
  DeviceList devices(3);
  CHECK(devices.ids() == std::vector<std::string>{"vgpu-0", "vgpu-1", "vgpu-2"});
  const auto snapshot = devices.snapshot();
  CHECK(snapshot.version == 1);
  CHECK(snapshot.devices ==
        std::vector<VirtualDevice>{{"vgpu-0", true}, {"vgpu-1", true}, {"vgpu-2", true}});
}

TEST_CASE("a health change bumps the version, a repeated one does not",
          "[device-plugin][devices]") {
  DeviceList devices(2);
  REQUIRE(devices.setHealthy("vgpu-1", true).has_value());
  CHECK(devices.snapshot().version == 1);
  REQUIRE(devices.setHealthy("vgpu-1", false).has_value());
  CHECK(devices.snapshot().version == 2);
  CHECK_FALSE(devices.snapshot().devices[1].healthy);
  CHECK_FALSE(devices.setHealthy("vgpu-9", false).has_value());
}

TEST_CASE("a waiter wakes on a change, on its abandon flag, or at its timeout",
          "[device-plugin][devices]") {
  DeviceList devices(1);
  SECTION("change") {
    std::jthread changer([&] {
      std::this_thread::sleep_for(50ms);
      REQUIRE(devices.setHealthy("vgpu-0", false).has_value());
    });
    const auto start = std::chrono::steady_clock::now();
    const auto snapshot = devices.waitForChange(1, 10s);
    CHECK(snapshot.version == 2);
    CHECK(std::chrono::steady_clock::now() - start < 5s);
  }
  SECTION("abandon") {
    std::atomic<bool> abandon{false};
    std::jthread stopper([&] {
      std::this_thread::sleep_for(50ms);
      abandon = true;
      devices.wakeWaiters();
    });
    const auto start = std::chrono::steady_clock::now();
    CHECK(devices.waitForChange(1, 10s, &abandon).version == 1);
    CHECK(std::chrono::steady_clock::now() - start < 5s);
  }
  SECTION("timeout") {
    CHECK(devices.waitForChange(1, 20ms).version == 1);
  }
}
