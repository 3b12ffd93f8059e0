// The backend's own log, as the shim writes it: its C stdio lines at once (the guard
// line-buffers its stdout), each on its own line, never glued to one of the shim's.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "backend-shim/running_shim.h"
#include "backend-shim/shim_test_support.h"
#include "support/cluster_env.h"

using namespace std::chrono_literals;
namespace test = gvirtus::backend_shim::test;
using gvirtus::testing::eventually;

namespace {

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
  }
  return lines;
}

bool hasLine(const std::string& text, const std::string& wanted) {
  const auto lines = linesOf(text);
  return std::find(lines.begin(), lines.end(), wanted) != lines.end();
}

}  // namespace

TEST_CASE(
    "backend-shim binary: the backend's unflushed stdio lines reach the log at once, each on "
    "its own line",
    "[shim_binary]") {
  test::RunningShim shim;
  // JSON lines, many of them (debug): any backend text glued to one would break it.
  shim.start({"--log-format", "json", "--log-level", "debug"},
             {"--say", "Up and running!", "--say-partial", "Current active childs: 0"});
  INFO(shim.process->output());
  REQUIRE(eventually([&] { return shim.readyz() == 200; }, 15s));
  // While the backend runs: it never flushes its stdout, and its stderr piece has no newline
  // (written after a quiet moment).
  REQUIRE(eventually(
      [&] { return hasLine(shim.process->output(), "fake backend: Up and running!"); }, 10s));
  REQUIRE(
      eventually([&] { return hasLine(shim.process->output(), "Current active childs: 0"); }, 10s));
  CHECK(test::processAlive(shim.backendPid()));

  shim.process->kill(SIGTERM);
  REQUIRE(shim.process->wait(15s) == std::optional<int>(0));
  const auto lines = linesOf(shim.process->output());
  int shimLines = 0;
  for (const auto& line : lines) {
    INFO(line);
    if (line.starts_with("{")) {
      CHECK(nlohmann::json::accept(line));
      ++shimLines;
    } else {
      CHECK((line.starts_with("fake backend: ") || line == "Current active childs: 0"));
    }
  }
  CHECK(shimLines > 5);
}
