#include "device-plugin/options.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using gvirtus::device_plugin::Options;
using gvirtus::device_plugin::parseOptions;
using gvirtus::device_plugin::validateOptions;

namespace {

std::expected<Options, int> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "gvirtus-device-plugin");
  std::vector<const char*> argv;
  for (const auto& arg : args) {
    argv.push_back(arg.c_str());
  }
  return parseOptions(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("device plugin options have the documented defaults", "[device-plugin][options]") {
  auto options = parse({});
  REQUIRE(options.has_value());
  CHECK(options->kubeletDir == "/var/lib/kubelet/device-plugins");
  CHECK(options->resource == "nvidia.com/gpu");
  CHECK(options->devices == 8);
  CHECK(options->cdi);
  CHECK(options->cdiDir == "/etc/cdi");
  CHECK(options->socketName == "gvirtus-vgpu.sock");
  CHECK(options->common.healthAddr == ":8080");
}

TEST_CASE("device plugin flags are read into the options", "[device-plugin][options]") {
  auto options = parse({"--kubelet-dir", "/tmp/kubelet", "--resource", "example.com/vgpu",
                        "--devices=3", "--cdi=false", "--cdi-dir", "/run/cdi", "--socket-name",
                        "other.sock", "--health-addr", "127.0.0.1:0"});
  REQUIRE(options.has_value());
  CHECK(options->kubeletDir == "/tmp/kubelet");
  CHECK(options->resource == "example.com/vgpu");
  CHECK(options->devices == 3);
  CHECK_FALSE(options->cdi);
  CHECK(options->cdiDir == "/run/cdi");
  CHECK(options->socketName == "other.sock");
  CHECK(options->common.healthAddr == "127.0.0.1:0");
}

TEST_CASE("bad device plugin flags stop with exit code 2", "[device-plugin][options]") {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--devices", "0"},
           {"--devices", "1025"},
           {"--devices", "many"},
           {"--resource", "gpu"},
           {"--resource", "kubernetes.io/gpu"},
           {"--socket-name", "a/b.sock"},
           {"--socket-name", "kubelet.sock"},
           {"--cdi=maybe"},
           {"--unknown"},
           {"--", "extra"},
       }) {
    INFO(args.front());
    auto options = parse(args);
    REQUIRE_FALSE(options.has_value());
    CHECK(options.error() == 2);
  }
}

TEST_CASE("--help and --version stop with exit code 0", "[device-plugin][options]") {
  CHECK(parse({"--help"}).error() == 0);
  CHECK(parse({"--version"}).error() == 0);
}

TEST_CASE("validation names the flag at fault", "[device-plugin][options]") {
  Options options;
  CHECK(validateOptions(options).has_value());

  auto check = [](Options o, const std::string& flag) {
    auto valid = validateOptions(o);
    REQUIRE_FALSE(valid.has_value());
    CHECK_THAT(valid.error().message, Catch::StartsWith(flag + ": "));
  };
  Options o = options;
  o.resource = "gpu";
  check(o, "--resource");
  o = options;
  o.devices = 0;
  check(o, "--devices");
  o = options;
  o.kubeletDir = "";
  check(o, "--kubelet-dir");
  o = options;
  o.socketName = "..";
  check(o, "--socket-name");
  o = options;
  o.kubeletDir = "/" + std::string(120, 'k');
  check(o, "--socket-name");
  o = options;
  o.cdiDir = "";
  check(o, "--cdi-dir");
  o.cdi = false;
  CHECK(validateOptions(o).has_value());
}
