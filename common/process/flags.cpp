#include "common/process/flags.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "common/base/strings.h"

namespace gvirtus {
namespace {

std::string joinCommaList(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) {
      out += ',';
    }
    out += item;
  }
  return out;
}

}  // namespace

FlagSet::FlagSet(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void FlagSet::addString(std::string name, std::string* target, std::string help) {
  addCustom(std::move(name), "string", *target, std::move(help),
            [target](const std::string& v) -> Result<void> {
              *target = v;
              return {};
            });
}

void FlagSet::addBool(std::string name, bool* target, std::string help) {
  flags_.push_back(Flag{std::move(name), "", *target ? "true" : "false", std::move(help),
                        [target](const std::string& v) -> Result<void> {
                          if (v == "true" || v == "1") {
                            *target = true;
                          } else if (v == "false" || v == "0") {
                            *target = false;
                          } else {
                            return fail("must be true or false, got \"" + v + "\"");
                          }
                          return {};
                        }});
}

void FlagSet::addInteger(std::string name, int64_t defaultValue, std::string help, int64_t min,
                         int64_t max, std::function<void(int64_t)> store) {
  addCustom(std::move(name), "int", std::to_string(defaultValue), std::move(help),
            [store = std::move(store), min, max](const std::string& v) -> Result<void> {
              int64_t value = 0;
              auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
              if (ec != std::errc() || end != v.data() + v.size()) {
                return fail("must be an integer, got \"" + v + "\"");
              }
              if (value < min || value > max) {
                return fail("must be between " + std::to_string(min) + " and " +
                            std::to_string(max) + ", got " + v);
              }
              store(value);
              return {};
            });
}

void FlagSet::addDuration(std::string name, Duration* target, std::string help) {
  addCustom(std::move(name), "duration", formatDuration(*target), std::move(help),
            [target](const std::string& v) -> Result<void> {
              auto d = parseDuration(v);
              if (!d) {
                return fail(d.error());
              }
              if (d->count() < 0) {
                return fail("must not be negative");
              }
              *target = *d;
              return {};
            });
}

void FlagSet::addList(std::string name, std::vector<std::string>* target, std::string help) {
  addCustom(std::move(name), "list", joinCommaList(*target), std::move(help),
            [target](const std::string& v) -> Result<void> {
              *target = splitList(v);
              return {};
            });
}

void FlagSet::addCustom(std::string name, std::string valueName, std::string defaultText,
                        std::string help, std::function<Result<void>(const std::string&)> parse) {
  flags_.push_back(Flag{std::move(name), std::move(valueName), std::move(defaultText),
                        std::move(help), std::move(parse)});
}

FlagSet::Flag* FlagSet::find(const std::string& name) {
  for (auto& flag : flags_) {
    if (flag.name == name) {
      return &flag;
    }
  }
  return nullptr;
}

bool FlagSet::wasSet(const std::string& name) const {
  for (const auto& flag : flags_) {
    if (flag.name == name) {
      return flag.set;
    }
  }
  return false;
}

Result<FlagSet::Outcome> FlagSet::parse(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      rest_.assign(argv + i + 1, argv + argc);
      break;
    }
    if (arg == "--help" || arg == "-h") {
      return Outcome::Help;
    }
    if (arg == "--version") {
      return Outcome::Version;
    }
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) {
      return fail("unexpected argument \"" + arg + "\" (flags start with --; see --help)");
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    Flag* flag = find(name);
    if (flag == nullptr) {
      return fail("--" + name + ": unknown flag (see --help)");
    }
    if (!value) {
      if (flag->valueName.empty()) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return fail("--" + name + ": needs a value");
      }
    }
    if (auto ok = flag->parse(*value); !ok) {
      return fail("--" + name + ": " + ok.error().message);
    }
    flag->set = true;
  }
  return Outcome::Run;
}

std::string FlagSet::helpText() const {
  std::string out = "Usage: " + program_ + " [flags]\n\n" + summary_ + "\n\nFlags:\n";
  for (const auto& flag : flags_) {
    std::string head = "  --" + flag.name;
    if (!flag.valueName.empty()) {
      head += " " + flag.valueName;
    }
    out += head + "\n      " + flag.help;
    if (!flag.defaultText.empty()) {
      out += " (default \"" + flag.defaultText + "\")";
    }
    out += "\n";
  }
  out += "  --help\n      show this help and exit\n  --version\n      print the version and exit\n";
  return out;
}

void addCommonFlags(FlagSet& flags, CommonOptions& options) {
  flags.addString("kubeconfig", &options.kubeconfig,
                  "path to a kubeconfig; empty means the in-cluster service account");
  flags.addString("log-level", &options.logLevel, "debug, info, warn or error");
  flags.addString("log-format", &options.logFormat, "json or text");
  flags.addString("health-addr", &options.healthAddr,
                  "HOST:PORT of the /healthz, /readyz and /metrics listener; empty disables it");
}

int usageError(const FlagSet& flags, const std::string& reason) {
  return configurationError(flags.program(), reason);
}

std::string envOr(const char* name, std::string fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : std::move(fallback);
}

int configurationError(std::string_view program, const std::string& reason) {
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(program.size()), program.data(),
               reason.c_str());
  return kExitUsage;
}

std::optional<int> parseCommandLine(FlagSet& flags, CommonOptions& common, int argc,
                                    const char* const* argv) {
  auto outcome = flags.parse(argc, argv);
  if (!outcome) {
    return usageError(flags, outcome.error().message);
  }
  if (*outcome == FlagSet::Outcome::Help) {
    std::cout << flags.helpText();
    return kExitOk;
  }
  if (*outcome == FlagSet::Outcome::Version) {
    std::cout << flags.program() << " " << GVIRTUS_VERSION << "\n";
    return kExitOk;
  }
  auto level = log::parseLevel(common.logLevel);
  if (!level) {
    return usageError(flags, "--log-level: " + level.error().message);
  }
  auto format = log::parseFormat(common.logFormat);
  if (!format) {
    return usageError(flags, "--log-format: " + format.error().message);
  }
  log::configure(*level, *format);
  return std::nullopt;
}

int runGuarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    log::error("fatal", {{"error", e.what()}});
  } catch (...) {
    log::error("fatal", {{"error", "an exception of unknown type"}});
  }
  return kExitFatal;
}

}  // namespace gvirtus
