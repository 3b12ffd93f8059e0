#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <expected>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base/error.h"
#include "common/telemetry/log.h"
#include "common/time/duration.h"

namespace gvirtus {

// Exit codes shared by every binary (docs/flags.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFatal = 1;
inline constexpr int kExitUsage = 2;

// The one flag parser. Flags are `--name value` or `--name=value`; booleans also take
// the bare `--name`. A flag's default is its target's value when it is added, and is
// shown in --help. Everything after `--` is left for the program (rest()).
class FlagSet {
 public:
  FlagSet(std::string program, std::string summary);

  void addString(std::string name, std::string* target, std::string help);
  void addBool(std::string name, bool* target, std::string help);
  // An integer of any width; the range is [min, max] and never wider than T's.
  template <std::integral T>
  void addInt(std::string name, T* target, std::string help, int64_t min = INT64_MIN,
              int64_t max = INT64_MAX) {
    constexpr int64_t lowest = std::cmp_less(std::numeric_limits<T>::min(), INT64_MIN)
                                   ? INT64_MIN
                                   : static_cast<int64_t>(std::numeric_limits<T>::min());
    constexpr int64_t highest = std::cmp_greater(std::numeric_limits<T>::max(), INT64_MAX)
                                    ? INT64_MAX
                                    : static_cast<int64_t>(std::numeric_limits<T>::max());
    addInteger(std::move(name), static_cast<int64_t>(*target), std::move(help),
               std::max(min, lowest), std::min(max, highest),
               [target](int64_t value) { *target = static_cast<T>(value); });
  }
  void addDuration(std::string name, Duration* target, std::string help);
  // A comma-separated list; empty items are dropped.
  void addList(std::string name, std::vector<std::string>* target, std::string help);
  // Any other type: `toValue` turns the text into a T, or gives the reason it cannot.
  template <class T, class Parse>
  void addParsed(std::string name, std::string valueName, T* target, std::string defaultText,
                 std::string help, Parse toValue) {
    addCustom(std::move(name), std::move(valueName), std::move(defaultText), std::move(help),
              [target, toValue = std::move(toValue)](const std::string& text) -> Result<void> {
                auto value = toValue(text);
                if (!value) {
                  return fail(std::move(value.error()));
                }
                *target = std::move(*value);
                return {};
              });
  }
  // The most general: `parse` validates and stores the text, returning a reason on failure.
  void addCustom(std::string name, std::string valueName, std::string defaultText, std::string help,
                 std::function<Result<void>(const std::string&)> parse);

  enum class Outcome { Run, Help, Version };
  // On error the message names the flag: "--port: must be between 1 and 65535".
  Result<Outcome> parse(int argc, const char* const* argv);

  const std::vector<std::string>& rest() const { return rest_; }
  // True when the flag appeared on the command line.
  bool wasSet(const std::string& name) const;
  std::string helpText() const;
  const std::string& program() const { return program_; }

 private:
  struct Flag {
    std::string name;
    std::string valueName;  // empty for booleans
    std::string defaultText;
    std::string help;
    std::function<Result<void>(const std::string&)> parse;
    bool set = false;
  };
  Flag* find(const std::string& name);
  void addInteger(std::string name, int64_t defaultValue, std::string help, int64_t min,
                  int64_t max, std::function<void(int64_t)> store);

  std::string program_;
  std::string summary_;
  std::vector<Flag> flags_;
  std::vector<std::string> rest_;
};

// Flags every binary has (docs/flags.md): --kubeconfig, --log-level, --log-format,
// --health-addr.
struct CommonOptions {
  std::string kubeconfig;
  std::string logLevel = "info";
  std::string logFormat = "text";
  std::string healthAddr = ":8080";
};
void addCommonFlags(FlagSet& flags, CommonOptions& options);

// Parses argv, prints --help or --version, validates and applies the log flags. Returns an
// exit code when the program should stop now (0 after help/version, 2 with a one-line
// reason on stderr after a bad flag), nullopt when it should run.
std::optional<int> parseCommandLine(FlagSet& flags, CommonOptions& common, int argc,
                                    const char* const* argv);

// Prints "program: reason" to stderr and returns kExitUsage; for validation after parse.
int usageError(const FlagSet& flags, const std::string& reason);
// The same for a configuration found bad once the program runs (a kubeconfig, a listener
// address taken): one line, exit code kExitUsage.
int configurationError(std::string_view program, const std::string& reason);

// The environment variable `name` (the downward API's POD_NAME, POD_NAMESPACE, ...), or
// `fallback` when it is unset or empty.
std::string envOr(const char* name, std::string fallback = {});

// Runs `body` and turns an exception that escaped it (a bug) into one logged "fatal" line
// and kExitFatal instead of std::terminate.
int runGuarded(const std::function<int()>& body);

// Every binary's main, one skeleton: parse the command line into the binary's Options
// (an exit code instead when it must stop: help, version, a bad flag), then run on them.
template <class Options>
int runMain(int argc, char** argv, std::expected<Options, int> (*parse)(int, const char* const*),
            int (*run)(const Options&)) {
  return runGuarded([&]() -> int {
    auto options = parse(argc, argv);
    return options ? run(*options) : options.error();
  });
}

}  // namespace gvirtus
