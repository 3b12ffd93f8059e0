#include "common/process/flags.h"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <expected>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using gvirtus::Duration;
using gvirtus::FlagSet;
using gvirtus::Result;
using namespace std::chrono_literals;

namespace {

// argv from a list; argv[0] is the program.
struct Args {
  explicit Args(std::vector<std::string> args) : strings(std::move(args)) {
    strings.insert(strings.begin(), "prog");
    for (const auto& s : strings) {
      pointers.push_back(s.c_str());
    }
  }
  int argc() const { return static_cast<int>(pointers.size()); }
  const char* const* argv() const { return pointers.data(); }
  std::vector<std::string> strings;
  std::vector<const char*> pointers;
};

struct Targets {
  std::string name = "default-name";
  std::string empty;
  bool verbose = false;
  bool enabled = true;
  int64_t port = 8080;
  Duration timeout = 2s;
  std::vector<std::string> items{"a", "b"};
  std::string mode = "fast";
};

void addAll(FlagSet& flags, Targets& t) {
  flags.addString("name", &t.name, "a name");
  flags.addString("empty", &t.empty, "no default shown");
  flags.addBool("verbose", &t.verbose, "talk more");
  flags.addBool("enabled", &t.enabled, "on or off");
  flags.addInt("port", &t.port, "a port", 1, 65535);
  flags.addDuration("timeout", &t.timeout, "how long");
  flags.addList("items", &t.items, "some items");
  flags.addCustom("mode", "fast|slow", t.mode, "the mode",
                  [&t](const std::string& v) -> Result<void> {
                    if (v != "fast" && v != "slow") {
                      return gvirtus::fail("must be fast or slow");
                    }
                    t.mode = v;
                    return {};
                  });
}

Result<FlagSet::Outcome> parse(FlagSet& flags, std::vector<std::string> args) {
  Args a(std::move(args));
  return flags.parse(a.argc(), a.argv());
}

std::string parseError(std::vector<std::string> args) {
  Targets t;
  FlagSet flags("prog", "summary");
  addAll(flags, t);
  auto outcome = parse(flags, std::move(args));
  REQUIRE_FALSE(outcome);
  return outcome.error().message;
}

// Runs `body` with stdout and stderr captured.
template <typename F>
std::pair<std::string, std::string> capture(F body) {
  std::ostringstream coutText;
  auto* oldBuf = std::cout.rdbuf(coutText.rdbuf());
  std::fflush(stderr);
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  const int saved = dup(STDERR_FILENO);
  dup2(fileno(file), STDERR_FILENO);
  body();
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::cout.rdbuf(oldBuf);
  std::string errText;
  std::rewind(file);
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    errText.append(buffer, n);
  }
  std::fclose(file);
  return {coutText.str(), errText};
}

}  // namespace

TEST_CASE("FlagSet leaves defaults alone when no flag is given", "[flags]") {
  Targets t;
  FlagSet flags("prog", "summary");
  addAll(flags, t);
  auto outcome = parse(flags, {});
  REQUIRE(outcome);
  CHECK(*outcome == FlagSet::Outcome::Run);
  CHECK(t.name == "default-name");
  CHECK(t.port == 8080);
  CHECK(t.timeout == 2s);
  CHECK(t.items == std::vector<std::string>{"a", "b"});
  CHECK_FALSE(flags.wasSet("name"));
  CHECK(flags.rest().empty());
}

TEST_CASE("FlagSet parses every type, --flag=value and --flag value", "[flags]") {
  Targets t;
  FlagSet flags("prog", "summary");
  addAll(flags, t);
  auto outcome = parse(flags, {"--name=alpha", "--verbose", "--enabled=false", "--port", "9999",
                               "--timeout", "1m30s", "--items=x, y,,z", "--mode", "slow"});
  REQUIRE(outcome);
  CHECK(*outcome == FlagSet::Outcome::Run);
  CHECK(t.name == "alpha");
  CHECK(t.verbose);
  CHECK_FALSE(t.enabled);
  CHECK(t.port == 9999);
  CHECK(t.timeout == 90s);
  CHECK(t.items == std::vector<std::string>{"x", "y", "z"});
  CHECK(t.mode == "slow");
  CHECK(flags.wasSet("name"));
  CHECK(flags.wasSet("port"));
  CHECK_FALSE(flags.wasSet("empty"));
  CHECK_FALSE(flags.wasSet("nonexistent"));
}

TEST_CASE("FlagSet string values may be empty or hold '=' and spaces", "[flags]") {
  Targets t;
  FlagSet flags("prog", "summary");
  addAll(flags, t);
  REQUIRE(parse(flags, {"--name=", "--empty", "a=b c"}));
  CHECK(t.name.empty());
  CHECK(t.empty == "a=b c");
  REQUIRE(parse(flags, {"--items="}));
  CHECK(t.items.empty());
}

TEST_CASE("FlagSet booleans", "[flags]") {
  for (const auto& [arg, want] :
       std::vector<std::pair<std::string, bool>>{{"--verbose", true},
                                                 {"--verbose=true", true},
                                                 {"--verbose=1", true},
                                                 {"--verbose=false", false},
                                                 {"--verbose=0", false}}) {
    INFO(arg);
    Targets t;
    t.verbose = !want;
    FlagSet flags("prog", "summary");
    addAll(flags, t);
    REQUIRE(parse(flags, {arg}));
    CHECK(t.verbose == want);
  }
  CHECK(parseError({"--verbose=yes"}) == "--verbose: must be true or false, got \"yes\"");
  // A bare boolean does not take the next argument.
  CHECK_THAT(parseError({"--verbose", "false"}), Catch::Contains("unexpected argument"));
}

TEST_CASE("FlagSet errors name the flag", "[flags]") {
  CHECK(parseError({"--x"}) == "--x: unknown flag (see --help)");
  CHECK(parseError({"--x=1"}) == "--x: unknown flag (see --help)");
  CHECK(parseError({"--name"}) == "--name: needs a value");
  CHECK(parseError({"--port"}) == "--port: needs a value");
  CHECK(parseError({"--port=0"}) == "--port: must be between 1 and 65535, got 0");
  CHECK(parseError({"--port", "65536"}) == "--port: must be between 1 and 65535, got 65536");
  CHECK(parseError({"--port=-1"}) == "--port: must be between 1 and 65535, got -1");
  CHECK(parseError({"--port=80x"}) == "--port: must be an integer, got \"80x\"");
  CHECK(parseError({"--port="}) == "--port: must be an integer, got \"\"");
  CHECK(parseError({"--port=99999999999999999999"}) ==
        "--port: must be an integer, got \"99999999999999999999\"");
  CHECK_THAT(parseError({"--timeout=5"}),
             Catch::StartsWith("--timeout: ") && Catch::Contains("unit"));
  CHECK_THAT(parseError({"--timeout=soon"}), Catch::StartsWith("--timeout: invalid duration"));
  CHECK_THAT(parseError({"--timeout="}),
             Catch::StartsWith("--timeout: ") && Catch::Contains("empty"));
  CHECK(parseError({"--mode=medium"}) == "--mode: must be fast or slow");
  CHECK_THAT(parseError({"positional"}), Catch::Contains("\"positional\""));
  CHECK_THAT(parseError({"-p"}), Catch::Contains("\"-p\""));
}

TEST_CASE("FlagSet leaves everything after -- for the program", "[flags]") {
  Targets t;
  FlagSet flags("prog", "summary");
  addAll(flags, t);
  REQUIRE(parse(flags, {"--port=1", "--", "/opt/gvirtus/bin/gvirtus-backend", "--port", "x"}));
  CHECK(t.port == 1);
  CHECK(flags.rest() ==
        std::vector<std::string>{"/opt/gvirtus/bin/gvirtus-backend", "--port", "x"});
}

TEST_CASE("FlagSet --help and --version", "[flags]") {
  for (const std::string arg : {"--help", "-h"}) {
    Targets t;
    FlagSet flags("prog", "summary");
    addAll(flags, t);
    CHECK(parse(flags, {arg}) == FlagSet::Outcome::Help);
  }
  Targets t;
  FlagSet flags("prog", "summary");
  addAll(flags, t);
  CHECK(parse(flags, {"--version"}) == FlagSet::Outcome::Version);
}

TEST_CASE("FlagSet help text lists every flag with its default", "[flags]") {
  Targets t;
  FlagSet flags("gvirtus-test", "Does test things.");
  addAll(flags, t);
  const std::string help = flags.helpText();
  CHECK_THAT(help, Catch::StartsWith("Usage: gvirtus-test [flags]"));
  CHECK_THAT(help, Catch::Contains("Does test things."));
  CHECK_THAT(help, Catch::Contains("--name string\n      a name (default \"default-name\")"));
  CHECK_THAT(help, Catch::Contains("--empty string\n      no default shown\n"));
  CHECK_THAT(help, Catch::Contains("--verbose\n      talk more (default \"false\")"));
  CHECK_THAT(help, Catch::Contains("--enabled\n      on or off (default \"true\")"));
  CHECK_THAT(help, Catch::Contains("--port int\n      a port (default \"8080\")"));
  CHECK_THAT(help, Catch::Contains("--timeout duration\n      how long (default \"2s\")"));
  CHECK_THAT(help, Catch::Contains("--items list\n      some items (default \"a,b\")"));
  CHECK_THAT(help, Catch::Contains("--mode fast|slow\n      the mode (default \"fast\")"));
  CHECK_THAT(help, Catch::Contains("--help"));
  CHECK_THAT(help, Catch::Contains("--version"));
}

TEST_CASE("parseCommandLine applies the common flags", "[flags]") {
  gvirtus::CommonOptions common;
  FlagSet flags("prog", "summary");
  gvirtus::addCommonFlags(flags, common);
  CHECK(common.healthAddr == ":8080");
  CHECK(common.logLevel == "info");
  CHECK(common.logFormat == "text");

  SECTION("a good command line runs") {
    Args args({"--kubeconfig", "/tmp/kc", "--log-level=debug", "--health-addr="});
    std::optional<int> code;
    capture([&] { code = gvirtus::parseCommandLine(flags, common, args.argc(), args.argv()); });
    CHECK_FALSE(code.has_value());
    CHECK(common.kubeconfig == "/tmp/kc");
    CHECK(common.healthAddr.empty());
    CHECK(gvirtus::log::enabled(gvirtus::log::Level::Debug));
    gvirtus::log::configure(gvirtus::log::Level::Info, gvirtus::log::Format::Text);
  }
  SECTION("a bad --log-level exits 2 with a reason naming the flag") {
    Args args({"--log-level=loud"});
    std::optional<int> code;
    auto [out, err] =
        capture([&] { code = gvirtus::parseCommandLine(flags, common, args.argc(), args.argv()); });
    CHECK(code == gvirtus::kExitUsage);
    CHECK(code == 2);
    CHECK_THAT(err, Catch::StartsWith("prog: --log-level: "));
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  }
  SECTION("a bad --log-format exits 2") {
    Args args({"--log-format", "xml"});
    std::optional<int> code;
    auto [out, err] =
        capture([&] { code = gvirtus::parseCommandLine(flags, common, args.argc(), args.argv()); });
    CHECK(code == 2);
    CHECK_THAT(err, Catch::StartsWith("prog: --log-format: "));
  }
  SECTION("an unknown flag exits 2") {
    Args args({"--nope"});
    std::optional<int> code;
    auto [out, err] =
        capture([&] { code = gvirtus::parseCommandLine(flags, common, args.argc(), args.argv()); });
    CHECK(code == 2);
    CHECK(err == "prog: --nope: unknown flag (see --help)\n");
  }
  SECTION("--help prints the help and exits 0") {
    Args args({"--help"});
    std::optional<int> code;
    auto [out, err] =
        capture([&] { code = gvirtus::parseCommandLine(flags, common, args.argc(), args.argv()); });
    CHECK(code == 0);
    CHECK(out == flags.helpText());
    CHECK(err.empty());
  }
  SECTION("--version prints the version and exits 0") {
    Args args({"--version"});
    std::optional<int> code;
    auto [out, err] =
        capture([&] { code = gvirtus::parseCommandLine(flags, common, args.argc(), args.argv()); });
    CHECK(code == 0);
    CHECK(out == std::string("prog ") + GVIRTUS_VERSION + "\n");
  }
}

TEST_CASE("usageError prints one line and returns 2", "[flags]") {
  FlagSet flags("prog", "summary");
  int code = 0;
  auto [out, err] = capture([&] { code = gvirtus::usageError(flags, "--port: bad"); });
  CHECK(code == 2);
  CHECK(err == "prog: --port: bad\n");
}

TEST_CASE("addInt stores into any integer type, never past the type's range", "[flags]") {
  uint16_t port = 9999;
  int sessions = 16;
  FlagSet flags("prog", "summary");
  flags.addInt("port", &port, "a port", 1, 65535);
  flags.addInt("sessions", &sessions, "no bounds given: int's");
  CHECK(flags.helpText().find("(default \"9999\")") != std::string::npos);

  REQUIRE(parse(flags, {"--port", "65535", "--sessions=-7"}));
  CHECK(port == 65535);
  CHECK(sessions == -7);

  FlagSet narrow("prog", "summary");
  narrow.addInt("sessions", &sessions, "int's range");
  auto outcome = parse(narrow, {"--sessions", "3000000000"});
  REQUIRE_FALSE(outcome);
  CHECK(outcome.error().message ==
        "--sessions: must be between -2147483648 and 2147483647, got 3000000000");
  CHECK(sessions == -7);
}

TEST_CASE("addParsed stores what its parser returns, or the parser's reason", "[flags]") {
  enum class Speed { Fast, Slow };
  auto toSpeed = [](const std::string& text) -> Result<Speed> {
    if (text == "fast") {
      return Speed::Fast;
    }
    if (text == "slow") {
      return Speed::Slow;
    }
    return gvirtus::fail("must be fast or slow, got \"" + text + "\"");
  };
  Speed speed = Speed::Fast;
  FlagSet flags("prog", "summary");
  flags.addParsed("speed", "fast|slow", &speed, "fast", "how fast", toSpeed);
  CHECK(flags.helpText().find("--speed fast|slow") != std::string::npos);
  REQUIRE(parse(flags, {"--speed", "slow"}));
  CHECK(speed == Speed::Slow);

  FlagSet again("prog", "summary");
  again.addParsed("speed", "fast|slow", &speed, "fast", "how fast", toSpeed);
  auto outcome = parse(again, {"--speed=medium"});
  REQUIRE_FALSE(outcome);
  CHECK(outcome.error().message == "--speed: must be fast or slow, got \"medium\"");
  CHECK(speed == Speed::Slow);
}

namespace {

struct Runs {
  int value = 0;
};

std::expected<Runs, int> parseRuns(int argc, const char* const* argv) {
  if (argc < 2) {
    return std::unexpected(2);
  }
  return Runs{std::stoi(argv[1])};
}

int runRuns(const Runs& runs) {
  if (runs.value < 0) {
    throw std::runtime_error("a bug");
  }
  return runs.value;
}

}  // namespace

TEST_CASE("runMain: the parser's exit code, the run's, and 1 for an escaped exception", "[flags]") {
  std::vector<std::string> strings;
  auto runWith = [&](std::vector<std::string> args) {
    strings = std::move(args);
    strings.insert(strings.begin(), "prog");
    std::vector<char*> argv;
    for (auto& s : strings) {
      argv.push_back(s.data());
    }
    int code = -1;
    capture([&] {
      code = gvirtus::runMain(static_cast<int>(argv.size()), argv.data(), parseRuns, runRuns);
    });
    return code;
  };
  CHECK(runWith({}) == 2);
  CHECK(runWith({"0"}) == 0);
  CHECK(runWith({"5"}) == 5);
  CHECK(runWith({"-1"}) == gvirtus::kExitFatal);
  // An exception from the parser too: std::stoi of text that is not a number.
  CHECK(runWith({"x"}) == gvirtus::kExitFatal);
}
