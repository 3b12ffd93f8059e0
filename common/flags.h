#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/duration.h"
#include "common/error.h"
#include "common/log.h"

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
  void addInt(std::string name, int64_t* target, std::string help, int64_t min = INT64_MIN,
              int64_t max = INT64_MAX);
  void addDuration(std::string name, Duration* target, std::string help);
  // A comma-separated list; empty items are dropped.
  void addList(std::string name, std::vector<std::string>* target, std::string help);
  // Any other type: `parse` validates and stores the text, returning a reason on failure.
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

// Every binary's main: runs `run` and turns an exception that escaped it (a bug) into one
// logged "fatal" line and kExitFatal instead of std::terminate.
int runMain(int argc, char** argv, int (*run)(int argc, const char* const* argv));

}  // namespace gvirtus
