#include "common/telemetry/log.h"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <regex>
#include <string>

namespace gvlog = gvirtus::log;
using nlohmann::json;

namespace {

constexpr const char* kTs = "2026-11-22T10:00:00.123Z";

// Runs `body` with stderr sent to a temporary file; returns what was written.
template <typename F>
std::string captureStderr(F body) {
  std::fflush(stderr);
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  const int saved = dup(STDERR_FILENO);
  dup2(fileno(file), STDERR_FILENO);
  body();
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string out;
  std::rewind(file);
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    out.append(buffer, n);
  }
  std::fclose(file);
  return out;
}

// Restores the process-wide defaults after a test changes them.
struct RestoreLogDefaults {
  ~RestoreLogDefaults() { gvlog::configure(gvlog::Level::Info, gvlog::Format::Text); }
};

}  // namespace

TEST_CASE("parseLevel and parseFormat", "[log]") {
  CHECK(gvlog::parseLevel("debug") == gvlog::Level::Debug);
  CHECK(gvlog::parseLevel("info") == gvlog::Level::Info);
  CHECK(gvlog::parseLevel("warn") == gvlog::Level::Warn);
  CHECK(gvlog::parseLevel("warning") == gvlog::Level::Warn);
  CHECK(gvlog::parseLevel("error") == gvlog::Level::Error);
  auto bad = gvlog::parseLevel("verbose");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::Contains("\"verbose\""));
  CHECK_FALSE(gvlog::parseLevel(""));
  CHECK_FALSE(gvlog::parseLevel("INFO"));

  CHECK(gvlog::parseFormat("text") == gvlog::Format::Text);
  CHECK(gvlog::parseFormat("json") == gvlog::Format::Json);
  auto badFormat = gvlog::parseFormat("yaml");
  REQUIRE_FALSE(badFormat);
  CHECK_THAT(badFormat.error().message, Catch::Contains("\"yaml\""));
}

TEST_CASE("formatLine text", "[log]") {
  CHECK(gvlog::formatLine(gvlog::Level::Info, gvlog::Format::Text, kTs, "started", nullptr) ==
        "2026-11-22T10:00:00.123Z INFO started");
  CHECK(gvlog::formatLine(gvlog::Level::Debug, gvlog::Format::Text, kTs, "m", nullptr) ==
        std::string(kTs) + " DEBUG m");
  CHECK(gvlog::formatLine(gvlog::Level::Warn, gvlog::Format::Text, kTs, "m", nullptr) ==
        std::string(kTs) + " WARN m");
  CHECK(gvlog::formatLine(gvlog::Level::Error, gvlog::Format::Text, kTs, "m", nullptr) ==
        std::string(kTs) + " ERROR m");

  // Fields in key order; plain strings bare, anything else as JSON.
  const json fields = {{"node", "worker-1"}, {"attempt", 3},    {"ready", true},
                       {"ratio", 0.5},       {"none", nullptr}, {"list", {1, 2}}};
  CHECK(gvlog::formatLine(gvlog::Level::Info, gvlog::Format::Text, kTs, "reconciled", fields) ==
        std::string(kTs) +
            " INFO reconciled attempt=3 list=[1,2] node=worker-1 none=null ratio=0.5 ready=true");
}

TEST_CASE("formatLine text quotes values that need it", "[log]") {
  auto line = [](const json& value) {
    return gvlog::formatLine(gvlog::Level::Info, gvlog::Format::Text, kTs, "m", {{"k", value}});
  };
  const std::string prefix = std::string(kTs) + " INFO m k=";
  CHECK(line("two words") == prefix + R"("two words")");
  CHECK(line(R"(say "hi")") == prefix + R"("say \"hi\"")");
  CHECK(line("a=b") == prefix + R"("a=b")");
  CHECK(line("line\nbreak") == prefix + R"("line\nbreak")");
  CHECK(line("tab\there") == prefix + R"("tab\there")");
  CHECK(line("") == prefix + R"("")");
  CHECK(line("10.0.0.1:9999") == prefix + "10.0.0.1:9999");
  CHECK(line(json{{"a", 1}}) == prefix + R"({"a":1})");
  // Invalid UTF-8 is replaced, never thrown.
  CHECK_NOTHROW(line(std::string("bad\xff\xfe", 5)));
}

TEST_CASE("formatLine json", "[log]") {
  const std::string text =
      gvlog::formatLine(gvlog::Level::Warn, gvlog::Format::Json, kTs, R"(backend "b-0" gone)",
                        {{"node", "worker-1"}, {"attempt", 3}, {"reason", "a\nb"}});
  CHECK(text.find('\n') == std::string::npos);
  const json line = json::parse(text);
  CHECK(line == json{{"ts", kTs},
                     {"level", "warn"},
                     {"msg", R"(backend "b-0" gone)"},
                     {"node", "worker-1"},
                     {"attempt", 3},
                     {"reason", "a\nb"}});

  const json bare =
      json::parse(gvlog::formatLine(gvlog::Level::Error, gvlog::Format::Json, kTs, "x", nullptr));
  CHECK(bare == json{{"ts", kTs}, {"level", "error"}, {"msg", "x"}});

  std::string invalid;
  REQUIRE_NOTHROW(invalid = gvlog::formatLine(gvlog::Level::Info, gvlog::Format::Json, kTs,
                                              std::string("bad\xff", 4), nullptr));
  CHECK_NOTHROW(json::parse(invalid));
}

TEST_CASE("configure filters by level", "[log]") {
  RestoreLogDefaults restore;
  gvlog::configure(gvlog::Level::Warn, gvlog::Format::Text);
  CHECK_FALSE(gvlog::enabled(gvlog::Level::Debug));
  CHECK_FALSE(gvlog::enabled(gvlog::Level::Info));
  CHECK(gvlog::enabled(gvlog::Level::Warn));
  CHECK(gvlog::enabled(gvlog::Level::Error));
  gvlog::configure(gvlog::Level::Debug, gvlog::Format::Text);
  CHECK(gvlog::enabled(gvlog::Level::Debug));
}

TEST_CASE("write sends one line per event to stderr", "[log]") {
  RestoreLogDefaults restore;
  gvlog::configure(gvlog::Level::Info, gvlog::Format::Json);
  const std::string out = captureStderr([] {
    gvlog::debug("hidden");
    gvlog::info("first", {{"n", 1}});
    gvlog::error("second");
  });
  REQUIRE(std::count(out.begin(), out.end(), '\n') == 2);
  const json first = json::parse(out.substr(0, out.find('\n')));
  CHECK(first["msg"] == "first");
  CHECK(first["level"] == "info");
  CHECK(first["n"] == 1);
  CHECK(std::regex_match(first["ts"].get<std::string>(),
                         std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  CHECK(json::parse(out.substr(out.find('\n') + 1))["msg"] == "second");

  gvlog::configure(gvlog::Level::Info, gvlog::Format::Text);
  const std::string text = captureStderr([] { gvlog::warn("plain", {{"k", "v"}}); });
  CHECK(std::regex_match(text, std::regex(R"(\S+Z WARN plain k=v\n)")));
}
