#include "backend-shim/backend/config.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend-shim/shim_test_support.h"

using namespace gvirtus::backend_shim;

TEST_CASE("backend-shim backend_config: renders GVirtuS's properties.json for the backend",
          "[backend_config]") {
  CHECK(renderBackendConfig(9999, kDefaultPlugins) ==
        R"({"communicator":[{"endpoint":{"suite":"tcp/ip","protocol":"tcp",)"
        R"("server_address":"0.0.0.0","port":"9999"},"plugins":["cudart","cublas","curand",)"
        R"("cudnn","cufft","cusolver","cusparse","nvrtc","cuda","nvml"]}],)"
        R"("secure_application":false})");
  const auto config = nlohmann::json::parse(renderBackendConfig(1234, {"cudart"}));
  CHECK(config["communicator"][0]["endpoint"]["port"] == "1234");
  CHECK(config["communicator"][0]["plugins"] == nlohmann::json::array({"cudart"}));
}

TEST_CASE("backend-shim backend_config: written atomically, parent folders created",
          "[backend_config]") {
  test::TempDir dir;
  const std::string path = dir.file("etc/gvirtus/properties.json");
  REQUIRE(writeBackendConfig(path, "{}").has_value());
  REQUIRE(writeBackendConfig(path, renderBackendConfig(9999, {"cudart"})).has_value());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == renderBackendConfig(9999, {"cudart"}) + "\n");
  int files = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator(dir.file("etc/gvirtus"))) {
    ++files;
  }
  CHECK(files == 1);  // no temporary file left behind

  auto error = writeBackendConfig("/proc/no/such/place.json", "{}");
  REQUIRE_FALSE(error.has_value());
  CHECK_THAT(error.error().message, Catch::Contains("/proc/no/such"));
}

TEST_CASE("backend-shim backend_config: argv ends with the config path", "[backend_config]") {
  CHECK(backendArgv({"/opt/gvirtus/bin/gvirtus-backend"}, "/tmp/p.json") ==
        std::vector<std::string>{"/opt/gvirtus/bin/gvirtus-backend", "/tmp/p.json"});
  CHECK(backendArgv({"/bin/x", "--flag"}, "/c.json") ==
        std::vector<std::string>{"/bin/x", "--flag", "/c.json"});
}

TEST_CASE("backend-shim backend_config: LD_LIBRARY_PATH is $GVIRTUS_HOME/lib only",
          "[backend_config]") {
  const std::vector<std::string> base{"PATH=/usr/bin", "LD_LIBRARY_PATH=/opt/gvirtus/lib/frontend",
                                      "GVIRTUS_HOME=/elsewhere", "LD_LIBRARY_PATHX=keep"};
  const auto env = backendEnvironment(base, "/opt/gvirtus");
  CHECK(env == std::vector<std::string>{"PATH=/usr/bin", "LD_LIBRARY_PATHX=keep",
                                        "GVIRTUS_HOME=/opt/gvirtus",
                                        "LD_LIBRARY_PATH=/opt/gvirtus/lib"});
  CHECK(backendEnvironment(base, "") == base);
}

TEST_CASE("backend-shim backend_config: resolves the backend executable", "[backend_config]") {
  auto sh = resolveExecutable("sh");
  REQUIRE(sh.has_value());
  CHECK(sh->front() == '/');
  CHECK(resolveExecutable(test::kFakeBackend).value() == test::kFakeBackend);

  auto missing = resolveExecutable("/no/such/gvirtus-backend");
  REQUIRE_FALSE(missing.has_value());
  CHECK_THAT(missing.error().message, Catch::Contains("/no/such/gvirtus-backend"));
  CHECK_FALSE(resolveExecutable("no-such-gvirtus-backend-anywhere").has_value());
  test::TempDir dir;
  std::ofstream(dir.file("plain")) << "not a program\n";
  std::filesystem::permissions(
      dir.file("plain"), std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  CHECK_FALSE(resolveExecutable(dir.file("plain")).has_value());  // not executable
  CHECK_FALSE(resolveExecutable(dir.path()).has_value());         // a folder
}

TEST_CASE("backend-shim backend_config: the peer guard preloaded after the image's own",
          "[backend_config]") {
  const PeerGuardSettings guard{"/opt/gvirtus-k8s/preload/libgvirtus-peer-guard.so",
                                "/tmp/gvirtus-peer-gate-x/gate.sock", 9999,
                                std::chrono::milliseconds(4500)};
  const auto env = withPeerGuard({"PATH=/bin", "LD_PRELOAD=/usr/lib/libfoo.so",
                                  "GVIRTUS_PEER_GUARD_PORT=1", "GVIRTUS_PEER_GUARD_SOCKETX=keep"},
                                 guard);
  CHECK(env ==
        std::vector<std::string>{
            "PATH=/bin", "GVIRTUS_PEER_GUARD_SOCKETX=keep",
            "LD_PRELOAD=/usr/lib/libfoo.so:/opt/gvirtus-k8s/preload/libgvirtus-peer-guard.so",
            "GVIRTUS_PEER_GUARD_SOCKET=/tmp/gvirtus-peer-gate-x/gate.sock",
            "GVIRTUS_PEER_GUARD_PORT=9999", "GVIRTUS_PEER_GUARD_TIMEOUT_MS=4500"});
  // Without an earlier LD_PRELOAD (or an empty one), the guard alone.
  for (const std::vector<std::string>& base :
       {std::vector<std::string>{}, std::vector<std::string>{"LD_PRELOAD="}}) {
    const auto alone = withPeerGuard(base, guard);
    REQUIRE(alone.size() == 4);
    CHECK(alone[0] == "LD_PRELOAD=/opt/gvirtus-k8s/preload/libgvirtus-peer-guard.so");
  }
}

TEST_CASE("backend-shim backend_config: without the peer check, the library alone is preloaded",
          "[backend_config]") {
  CHECK(withPreload({"PATH=/bin", "LD_PRELOAD=/usr/lib/libfoo.so"}, "/p/guard.so") ==
        std::vector<std::string>{"PATH=/bin", "LD_PRELOAD=/usr/lib/libfoo.so:/p/guard.so"});
  CHECK(withPreload({}, "/p/guard.so") == std::vector<std::string>{"LD_PRELOAD=/p/guard.so"});
}
