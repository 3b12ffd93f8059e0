#include "labeler/options.h"

#include <catch2/catch.hpp>
#include <cstdlib>

#include "support/child_process.h"
#include "support/cluster_env.h"

using gvirtus::labeler::Options;
using gvirtus::labeler::parseOptions;

namespace {

std::optional<int> parse(std::vector<const char*> args, Options& options) {
  args.insert(args.begin(), "gvirtus-labeler");
  auto parsed = parseOptions(static_cast<int>(args.size()), args.data());
  if (!parsed) {
    return parsed.error();
  }
  options = *parsed;
  return std::nullopt;
}

std::string labelerBinary() {
  return gvirtus::testing::binDir() + "/gvirtus-labeler";
}

}  // namespace

TEST_CASE("labeler options take their defaults from the design", "[labeler][options]") {
  unsetenv("NODE_NAME");
  Options options;
  REQUIRE_FALSE(parse({"--node-name", "n1"}, options));
  CHECK(options.nodeName == "n1");
  CHECK(options.defaultFrontend == "true");
  CHECK(options.defaultBackend == "false");
  CHECK(options.gpuProbePaths ==
        std::vector<std::string>{"/proc/driver/nvidia/gpus", "/dev/nvidiactl"});
  CHECK(options.common.healthAddr == ":8080");
}

TEST_CASE("labeler takes the node name from NODE_NAME", "[labeler][options]") {
  setenv("NODE_NAME", "from-env", 1);
  Options options;
  REQUIRE_FALSE(parse({}, options));
  CHECK(options.nodeName == "from-env");
  unsetenv("NODE_NAME");
}

TEST_CASE("labeler rejects bad flags with exit 2", "[labeler][options]") {
  unsetenv("NODE_NAME");
  Options options;
  CHECK(parse({}, options) == 2);
  Options o2;
  CHECK(parse({"--node-name", "n", "--default-backend", "yes"}, o2) == 2);
  Options o3;
  CHECK(parse({"--node-name", "n", "--gpu-probe-interval", "10"}, o3) == 2);
}

TEST_CASE("gvirtus-labeler binary: help, version and a bad flag", "[labeler][options]") {
  using gvirtus::testing::runCommand;
  auto [helpCode, help] = runCommand({labelerBinary(), "--help"});
  CHECK(helpCode == 0);
  CHECK(help.find("--gpu-probe-paths") != std::string::npos);
  auto [versionCode, version] = runCommand({labelerBinary(), "--version"});
  CHECK(versionCode == 0);
  CHECK(version.find("gvirtus-labeler") != std::string::npos);
  auto [badCode, bad] = runCommand({labelerBinary(), "--no-such-flag"});
  CHECK(badCode == 2);
  CHECK(bad == "gvirtus-labeler: --no-such-flag: unknown flag (see --help)\n");
  auto [missingCode, missing] = runCommand({labelerBinary()}, {"NODE_NAME="});
  CHECK(missingCode == 2);
  CHECK(missing.find("--node-name") != std::string::npos);
}
