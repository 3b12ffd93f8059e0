#include "backend-shim/options.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "backend-shim/backend/config.h"
#include "backend-shim/peer_guard_test_support.h"
#include "backend-shim/shim_test_support.h"

using namespace gvirtus::backend_shim;
using namespace std::chrono_literals;

namespace {

// parseOptions over a literal argv.
std::expected<Options, int> parse(std::vector<std::string> args) {
  args.insert(args.begin(), kProgram);
  std::vector<const char*> argv;
  for (const auto& a : args) {
    argv.push_back(a.c_str());
  }
  return parseOptions(static_cast<int>(argv.size()), argv.data());
}

// Sets an environment variable for one test.
class EnvVar {
 public:
  EnvVar(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
    }
    ::setenv(name, value.c_str(), 1);
  }
  ~EnvVar() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("backend-shim options: defaults, with the backend command after --", "[options]") {
  EnvVar home("GVIRTUS_HOME", "");
  EnvVar pod("POD_NAME", "backend-0");
  EnvVar ns("POD_NAMESPACE", "gvirtus-system");
  auto options = parse({"--", test::kFakeBackend, "--ignore-sigterm"});
  REQUIRE(options.has_value());
  CHECK(options->port == 9999);
  CHECK(options->plugins == kDefaultPlugins);
  CHECK(options->maxSessions == 16);
  CHECK(options->sessions == "per-pod");
  CHECK(options->sessionPool == 2);
  CHECK(options->maxConnectionsPerPod == 64);
  CHECK(options->publishInterval == 5s);
  CHECK(options->drainTimeout == 30s);
  CHECK(options->common.healthAddr == ":8080");
  CHECK(options->configOut.ends_with(".json"));
  CHECK(options->backendCommand ==
        std::vector<std::string>{test::kFakeBackend, "--ignore-sigterm"});
  CHECK(options->peerCheck);
  CHECK(options->peerWait == 3s);
  CHECK(options->maxLeakedSockets == 256);
  CHECK(options->leakRestartMaxDefer == 5min);
  CHECK(options->backendSelector == "app.kubernetes.io/component=backend");
  // ../preload/ from the binary's folder: the build tree has tests/ and preload/ side by side
  // as the image has bin/ and preload/.
  CHECK(options->peerGuardLibrary == std::filesystem::canonical(test::kPeerGuardLibrary).string());
}

TEST_CASE("backend-shim options: the peer check's flags", "[options]") {
  EnvVar home("GVIRTUS_HOME", "");
  EnvVar pod("POD_NAME", "backend-0");
  EnvVar ns("POD_NAMESPACE", "gvirtus-system");
  auto options =
      parse({"--peer-wait", "500ms", "--peer-guard-library", test::kPeerGuardLibrary, "--", "sh"});
  REQUIRE(options.has_value());
  CHECK(options->peerWait == 500ms);
  CHECK(options->peerGuardLibrary == test::kPeerGuardLibrary);
  // Without the check the library is still needed to hand per-pod processes their
  // connections; only --sessions=shared runs without it.
  CHECK(parse({"--peer-check=false", "--peer-guard-library", "/no/such.so", "--", "sh"}).error() ==
        2);
  options = parse({"--peer-check=false", "--sessions=shared", "--peer-guard-library", "/no/such.so",
                   "--", "sh"});
  REQUIRE(options.has_value());
  CHECK_FALSE(options->peerCheck);
  CHECK(parse({"--peer-wait", "2m", "--", "sh"}).error() == 2);
  CHECK(parse({"--peer-wait", "-1s", "--", "sh"}).error() == 2);
  CHECK(parse({"--peer-guard-library", "/no/such.so", "--", "sh"}).error() == 2);
  CHECK(parse({"--sessions", "per-thread", "--", "sh"}).error() == 2);
  CHECK(parse({"--session-pool", "0", "--", "sh"}).error() == 2);
  CHECK(parse({"--max-connections-per-pod", "0", "--", "sh"}).error() == 2);
}

TEST_CASE("backend-shim options: the peer check needs the pod and its library", "[options]") {
  Options options;
  options.plugins = kDefaultPlugins;
  options.backendCommand = {"sh"};
  auto error = validateOptions(options);
  REQUIRE_FALSE(error.has_value());
  CHECK(error.error().message ==
        "--peer-check: needs this pod's name and namespace to read its gvirtus.io/peers "
        "annotation: set POD_NAME and POD_NAMESPACE (or --pod-name, --pod-namespace), or pass "
        "--peer-check=false");
  options.peerCheck = false;
  CHECK(validateOptions(options).has_value());

  options.peerCheck = true;
  options.podName = "backend-0";
  options.podNamespace = "gvirtus-system";
  options.peerGuardLibrary = "/no/such/libgvirtus-peer-guard.so";
  error = validateOptions(options);
  REQUIRE_FALSE(error.has_value());
  CHECK(error.error().message ==
        "--peer-guard-library: /no/such/libgvirtus-peer-guard.so is not a file (stage "
        "libgvirtus-peer-guard.so there, or pass --peer-check=false)");
  options.peerGuardLibrary = "/tmp/a:b.so";
  error = validateOptions(options);
  REQUIRE_FALSE(error.has_value());
  CHECK_THAT(error.error().message, Catch::Contains("cannot be put in LD_PRELOAD"));
  options.peerGuardLibrary = test::kPeerGuardLibrary;
  CHECK(validateOptions(options).has_value());
}

TEST_CASE("backend-shim options: flags and environment", "[options]") {
  EnvVar home("GVIRTUS_HOME", "");
  EnvVar pod("POD_NAME", "backend-0");
  EnvVar ns("POD_NAMESPACE", "gvirtus-system");
  auto options = parse(
      {"--port=10000", "--plugins", "cudart,cublas", "--config-out", "/tmp/x/backend.json",
       "--max-sessions", "4", "--publish-interval", "2s", "--drain-timeout", "1m", "--stop-timeout",
       "500ms", "--leak-restart-max-defer", "0s", "--backend-selector", "app=gvirtus", "--", "sh"});
  REQUIRE(options.has_value());
  CHECK(options->port == 10000);
  CHECK(options->plugins == std::vector<std::string>{"cudart", "cublas"});
  CHECK(options->configOut == "/tmp/x/backend.json");
  CHECK(options->maxSessions == 4);
  CHECK(options->publishInterval == 2s);
  CHECK(options->drainTimeout == 1min);
  CHECK(options->stopTimeout == 500ms);
  CHECK(options->leakRestartMaxDefer == 0s);
  CHECK(options->backendSelector == "app=gvirtus");
  CHECK(options->podName == "backend-0");
  CHECK(options->podNamespace == "gvirtus-system");
  REQUIRE(options->backendCommand.size() == 1);
  CHECK(options->backendCommand[0].ends_with("/sh"));  // resolved on PATH
}

TEST_CASE("backend-shim options: the default backend is $GVIRTUS_HOME/bin/gvirtus-backend",
          "[options]") {
  test::TempDir dir;
  std::filesystem::create_directories(dir.file("bin"));
  std::filesystem::create_symlink(test::kFakeBackend, dir.file("bin/gvirtus-backend"));
  EnvVar home("GVIRTUS_HOME", dir.path());
  auto options = parse({"--peer-check=false"});
  REQUIRE(options.has_value());
  CHECK(options->gvirtusHome == dir.path());
  CHECK(options->backendCommand == std::vector<std::string>{dir.file("bin/gvirtus-backend")});
}

TEST_CASE("backend-shim options: bad configuration exits 2", "[options]") {
  EnvVar home("GVIRTUS_HOME", "");
  CHECK(parse({"--port", "0", "--", "sh"}).error() == 2);
  CHECK(parse({"--port", "65536", "--", "sh"}).error() == 2);
  CHECK(parse({"--config-out", "/tmp/backend.yaml", "--", "sh"}).error() == 2);
  CHECK(parse({"--config-out", "/tmp/.json", "--", "sh"}).error() == 2);
  CHECK(parse({"--plugins", "", "--", "sh"}).error() == 2);
  CHECK(parse({"--publish-interval", "0s", "--", "sh"}).error() == 2);
  CHECK(parse({"--max-sessions", "0", "--", "sh"}).error() == 2);
  CHECK(parse({"--leak-restart-max-defer", "-1s", "--", "sh"}).error() == 2);
  CHECK(parse({"--backend-selector", "", "--", "sh"}).error() == 2);
  CHECK(parse({}).error() == 2);  // no backend binary
  CHECK(parse({"--", "/no/such/gvirtus-backend"}).error() == 2);
  CHECK(parse({"--gvirtus-home", "/no/such/home"}).error() == 2);
  CHECK(parse({"--help"}).error() == 0);
  CHECK(parse({"--version"}).error() == 0);
}

TEST_CASE("backend-shim options: validateOptions names the flag", "[options]") {
  Options options;
  options.plugins = kDefaultPlugins;
  options.backendCommand = {"sh"};
  options.configOut = "/tmp/properties.yaml";
  auto error = validateOptions(options);
  REQUIRE_FALSE(error.has_value());
  CHECK_THAT(error.error().message, Catch::StartsWith("--config-out:"));

  options.configOut = "/tmp/properties.json";
  options.backendCommand.clear();
  options.gvirtusHome = "/no/such/home";
  error = validateOptions(options);
  REQUIRE_FALSE(error.has_value());
  CHECK(error.error().message ==
        "--gvirtus-home: no backend binary: /no/such/home/bin/gvirtus-backend is not an "
        "executable file");
}
