#include "device-plugin/cdi/spec.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "device-plugin/dp_test_support.h"

using namespace gvirtus::device_plugin;
using gvirtus::device_plugin::test::TempDir;

namespace {

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

const std::vector<std::string> kIds{"vgpu-0", "vgpu-1", "vgpu-2"};

}  // namespace

TEST_CASE("CDI names and edits of a virtual GPU", "[device-plugin][cdi]") {
  CHECK(cdiDeviceName("vgpu-3") == "gvirtus.io/vgpu=vgpu-3");
  CHECK(cdiDeviceEnv("vgpu-3") == "GVIRTUS_VGPU_3=vgpu-3");
  CHECK(cdiDeviceEnv("vgpu-12") == "GVIRTUS_VGPU_12=vgpu-12");
}

TEST_CASE("the CDI spec holds one env-only device per virtual GPU", "[device-plugin][cdi]") {
  const auto spec = nlohmann::json::parse(renderCdiSpec(kIds));
  CHECK(spec.at("cdiVersion") == "0.5.0");
  CHECK(spec.at("kind") == "gvirtus.io/vgpu");
  CHECK_FALSE(spec.contains("containerEdits"));
  const auto& devices = spec.at("devices");
  REQUIRE(devices.size() == kIds.size());
  for (size_t i = 0; i < kIds.size(); ++i) {
    INFO(kIds[i]);
    const auto& device = devices.at(i);
    CHECK(device.at("name") == kIds[i]);
    CHECK(device.size() == 2);  // name and containerEdits only
    const auto& edits = device.at("containerEdits");
    CHECK(edits == nlohmann::json{{"env", {cdiDeviceEnv(kIds[i])}}});
  }
}

TEST_CASE("the CDI spec is written atomically into a folder it creates", "[device-plugin][cdi]") {
  TempDir dir;
  const auto cdiDir = dir.file("etc/cdi");
  auto written = writeCdiSpec(cdiDir, kIds);
  REQUIRE(written.has_value());
  CHECK(*written == cdiDir / "gvirtus.io-vgpu.json");
  CHECK(readFile(*written) == renderCdiSpec(kIds));
  struct stat info {};
  REQUIRE(::stat(written->c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0644);
  // Nothing but the spec is left in the folder: no temporary file.
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(cdiDir)) {
    ++files;
  }
  CHECK(files == 1);

  SECTION("the same content leaves the file alone") {
    REQUIRE(::stat(written->c_str(), &info) == 0);
    const ino_t inode = info.st_ino;
    REQUIRE(writeCdiSpec(cdiDir, kIds).has_value());
    REQUIRE(::stat(written->c_str(), &info) == 0);
    CHECK(info.st_ino == inode);
  }
  SECTION("other content replaces the file through a rename") {
    REQUIRE(::stat(written->c_str(), &info) == 0);
    const ino_t inode = info.st_ino;
    const std::vector<std::string> fewer{"vgpu-0"};
    REQUIRE(writeCdiSpec(cdiDir, fewer).has_value());
    REQUIRE(::stat(written->c_str(), &info) == 0);
    CHECK(info.st_ino != inode);
    CHECK(readFile(*written) == renderCdiSpec(fewer));
  }
}

TEST_CASE("a CDI folder that cannot be made is an error", "[device-plugin][cdi]") {
  TempDir dir;
  std::ofstream(dir.file("file")) << "not a folder";
  auto written = writeCdiSpec(dir.file("file") / "cdi", kIds);
  REQUIRE_FALSE(written.has_value());
  CHECK_THAT(written.error().message, Catch::Contains("file/cdi"));
}
