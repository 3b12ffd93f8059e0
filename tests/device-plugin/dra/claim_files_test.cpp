#include "device-plugin/dra/claim_files.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/base/atomic_file.h"
#include "support/temp_dir.h"

using namespace gvirtus;
using namespace gvirtus::device_plugin;
using gvirtus::testing::TempDir;

TEST_CASE("a prepared claim's CDI spec mounts its file read-only and sets GVIRTUS_CONFIG",
          "[dra-files]") {
  const auto spec = nlohmann::json::parse(renderClaimCdiSpec("u-1", "/state/claims/u-1/p.json"));
  CHECK(spec.at("cdiVersion") == "0.5.0");
  CHECK(spec.at("kind") == "gvirtus.io/claim");
  REQUIRE(spec.at("devices").size() == 1);
  const auto& device = spec["devices"][0];
  CHECK(device.at("name") == "u-1");
  const auto& edits = device.at("containerEdits");
  CHECK(edits.at("env") == nlohmann::json::array({"GVIRTUS_CONFIG=/etc/gvirtus/properties.json"}));
  REQUIRE(edits.at("mounts").size() == 1);
  const auto& mount = edits["mounts"][0];
  CHECK(mount.at("hostPath") == "/state/claims/u-1/p.json");
  CHECK(mount.at("containerPath") == "/etc/gvirtus/properties.json");
  const auto options = mount.at("options").get<std::vector<std::string>>();
  CHECK(std::find(options.begin(), options.end(), "ro") != options.end());
  CHECK(std::find(options.begin(), options.end(), "bind") != options.end());
}

TEST_CASE("a claim's files are written, listed and removed", "[dra-files]") {
  TempDir state;
  TempDir cdi;
  ClaimFiles files(state.path(), cdi.path());
  CHECK_FALSE(files.prepared("u-1"));
  auto device = files.write("u-1", "{\"p\":1}", "ns/be/gpu-0");
  REQUIRE(device.has_value());
  CHECK(*device == "gvirtus.io/claim=u-1");
  CHECK(readWholeFile(files.propertiesPath("u-1")) == "{\"p\":1}");
  CHECK(files.cdiSpecPath("u-1").parent_path() == cdi.path());
  const auto spec = nlohmann::json::parse(readWholeFile(files.cdiSpecPath("u-1")));
  CHECK(spec["devices"][0]["containerEdits"]["mounts"][0]["hostPath"] ==
        files.propertiesPath("u-1").string());
  REQUIRE(files.write("u-2", "{}", "ns/be/gpu-1").has_value());
  CHECK(files.prepared("u-1"));
  CHECK(files.preparedAllocation("u-1") == "ns/be/gpu-0");
  CHECK(files.preparedAllocation("u-9").empty());
  CHECK(files.preparedClaims() == std::vector<std::string>{"u-1", "u-2"});

  REQUIRE(files.remove("u-1").has_value());
  CHECK_FALSE(files.prepared("u-1"));
  CHECK_FALSE(std::filesystem::exists(files.cdiSpecPath("u-1")));
  CHECK_FALSE(std::filesystem::exists(files.propertiesPath("u-1").parent_path()));
  CHECK(files.remove("u-1").has_value());  // again: nothing there is no error
  CHECK(files.preparedClaims() == std::vector<std::string>{"u-2"});
}

TEST_CASE("a claim UID that is not a plain name never reaches a file", "[dra-files]") {
  TempDir state;
  TempDir cdi;
  ClaimFiles files(state.path(), cdi.path());
  for (const char* uid : {"", "..", "../../etc", "a/b", "a b", "u\n"}) {
    auto written = files.write(uid, "{}", "ns/be/gpu-0");
    REQUIRE_FALSE(written.has_value());
    CHECK_THAT(written.error().message, Catch::Contains("is not 1-64 letters"));
    CHECK_FALSE(files.remove(uid).has_value());
  }
  CHECK_FALSE(validateClaimUid(std::string(65, 'a')).has_value());
  CHECK(validateClaimUid("0b6f2c7e-3d4a-4c1e-9f00-1234567890ab").has_value());
  CHECK(std::filesystem::is_empty(cdi.path()));
}
