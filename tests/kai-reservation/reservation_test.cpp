#include "kai-reservation/reservation.h"

#include <catch2/catch.hpp>
#include <cstdlib>

#include "kai-reservation/options.h"
#include "support/child_process.h"
#include "support/cluster_env.h"

using namespace gvirtus::kai_reservation;

TEST_CASE("the reserved device is the one virtual GPU the kubelet gave", "[kai-reservation]") {
  CHECK(reservedDevice("vgpu-3") == "vgpu-3");
  CHECK(reservedDevice(" vgpu-0 ") == "vgpu-0");
  auto none = reservedDevice("");
  REQUIRE_FALSE(none.has_value());
  CHECK_THAT(none.error().message, Catch::Contains("GVIRTUS_VGPU_IDS is empty"));
  auto two = reservedDevice("vgpu-1,vgpu-2");
  REQUIRE_FALSE(two.has_value());
  CHECK_THAT(two.error().message, Catch::Contains("exactly one device"));
}

TEST_CASE("options come from the pod's environment, as KAI's binder runs the image",
          "[kai-reservation][options]") {
  setenv("POD_NAME", "gpu-reservation-fe-a-x1y2z", 1);
  setenv("POD_NAMESPACE", "kai-resource-reservation", 1);
  setenv("GVIRTUS_VGPU_IDS", "vgpu-5", 1);
  const char* argv[] = {"gvirtus-kai-reservation"};
  auto options = parseOptions(1, argv);
  REQUIRE(options.has_value());
  CHECK(options->podName == "gpu-reservation-fe-a-x1y2z");
  CHECK(options->podNamespace == "kai-resource-reservation");
  CHECK(options->vgpuIds == "vgpu-5");
  CHECK(options->common.healthAddr.empty());
  unsetenv("POD_NAME");
  unsetenv("POD_NAMESPACE");
  unsetenv("GVIRTUS_VGPU_IDS");
}

TEST_CASE("bad flags and a missing pod name are one line and exit 2",
          "[kai-reservation][options]") {
  const std::string binary = gvirtus::testing::binDir() + "/gvirtus-kai-reservation";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "gvirtus-kai-reservation: --pod-name: required"},
      {{"--pod-name", "p"}, "gvirtus-kai-reservation: --pod-namespace: required"},
      {{"--pod-name", "p", "--pod-namespace", "n", "--retry-for", "0s"},
       "gvirtus-kai-reservation: --retry-for: must be positive"},
      {{"--bogus"}, "gvirtus-kai-reservation: "}};
  for (const auto& [args, expected] : cases) {
    std::vector<std::string> argv{binary};
    argv.insert(argv.end(), args.begin(), args.end());
    auto [code, output] = gvirtus::testing::runCommand(argv, {"POD_NAME=", "POD_NAMESPACE="});
    INFO(output);
    CHECK(code == 2);
    CHECK_THAT(output, Catch::StartsWith(expected));
    CHECK(std::count(output.begin(), output.end(), '\n') == 1);
  }
}

TEST_CASE("no virtual GPU in the environment is a configuration error naming it",
          "[kai-reservation]") {
  auto [code, output] =
      gvirtus::testing::runCommand({gvirtus::testing::binDir() + "/gvirtus-kai-reservation",
                                    "--pod-name", "p", "--pod-namespace", "n"},
                                   {"GVIRTUS_VGPU_IDS="});
  INFO(output);
  CHECK(code == 2);
  CHECK_THAT(output, Catch::Contains("GVIRTUS_VGPU_IDS is empty"));
}
