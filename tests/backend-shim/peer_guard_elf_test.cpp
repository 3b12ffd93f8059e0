// libgvirtus-peer-guard.so is loaded into GVirtuS's image, not ours (Ubuntu 22.04's glibc
// 2.35, and arm64, whose oldest symbol versions are GLIBC_2.17): what the built file asks of
// the dynamic loader, read with readelf.
#include <catch2/catch.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include "backend-shim/backend/config.h"
#include "backend-shim/peer_guard_test_support.h"
#include "support/child_process.h"

using gvirtus::testing::runCommand;
namespace test = gvirtus::backend_shim::test;

namespace {

std::string readelf(const std::string& options) {
  auto tool = gvirtus::backend_shim::resolveExecutable("readelf");
  REQUIRE(tool.has_value());
  auto [code, out] = runCommand({*tool, options, "-W", test::kPeerGuardLibrary});
  INFO(out);
  REQUIRE(code == 0);
  return out;
}

}  // namespace

TEST_CASE("peer guard library: needs libc.so.6 alone", "[peer_guard_elf]") {
  const std::string dynamic = readelf("-d");
  std::set<std::string> needed;
  const std::regex pattern(R"(\(NEEDED\)\s+Shared library: \[([^\]]+)\])");
  for (std::sregex_iterator it(dynamic.begin(), dynamic.end(), pattern), end; it != end; ++it) {
    needed.insert((*it)[1]);
  }
  INFO(dynamic);
  CHECK(needed.contains("libc.so.6"));
  for (const auto& library : needed) {
    INFO(library);
    CHECK((library == "libc.so.6" || library.starts_with("ld-linux")));
  }
}

TEST_CASE("peer guard library: no symbol version newer than GLIBC_2.17", "[peer_guard_elf]") {
  // The versions the loader must find (.gnu.version_r), and each symbol's.
  const std::string versions = readelf("-V") + readelf("--dyn-syms");
  INFO(versions);
  const std::regex glibc(R"(GLIBC_(\d+)\.(\d+)(\.\d+)?)");
  int seen = 0;
  for (std::sregex_iterator it(versions.begin(), versions.end(), glibc), end; it != end; ++it) {
    const auto version = std::make_tuple(std::stoi((*it)[1]), std::stoi((*it)[2]));
    INFO(it->str());
    CHECK(version <= std::make_tuple(2, 17));
    ++seen;
  }
  CHECK(seen > 0);
  // Nothing of the C++ runtime or libgcc_s.
  for (const char* other : {"GLIBCXX", "CXXABI", "GCC_"}) {
    CHECK(versions.find(other) == std::string::npos);
  }
}

TEST_CASE(
    "peer guard library: exports accept, accept4, bind, setsockopt and CUDA's allocation calls "
    "only",
    "[peer_guard_elf]") {
  const std::string symbols = readelf("--dyn-syms");
  std::set<std::string> defined;
  std::istringstream lines(symbols);
  std::string line;
  // "   12: 0000000000001520     7 FUNC    GLOBAL DEFAULT   12 accept"
  const std::regex entry(R"(^\s*\d+:\s+\S+\s+\d+\s+\S+\s+(GLOBAL|WEAK)\s+\S+\s+(\S+)\s+(\S+))");
  while (std::getline(lines, line)) {
    std::smatch match;
    if (std::regex_search(line, match, entry) && match[2] != "UND") {
      defined.insert(match[3]);
    }
  }
  INFO(symbols);
  CHECK(defined == std::set<std::string>{
                       "accept", "accept4", "bind", "setsockopt", "cudaMalloc", "cudaMallocManaged",
                       "cudaMallocPitch", "cudaMallocAsync", "cudaFree", "cudaFreeAsync",
                       "cudaMemGetInfo", "cuMemAlloc_v2", "cuMemAllocManaged", "cuMemAllocPitch_v2",
                       "cuMemAllocAsync", "cuMemFree_v2", "cuMemFreeAsync", "cuMemGetInfo_v2"});
}
