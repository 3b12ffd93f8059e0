#include "kubectl-gvirtus/options.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

namespace gvirtus::kubectl_gvirtus {
namespace {

// Flags that take no value: the next argument after them is a positional one.
bool isBoolFlag(const std::string& arg) {
  return arg == "--help" || arg == "-h" || arg == "--version";
}

std::string defaultKubeconfig() {
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    const std::string list = env;
    return list.substr(0, list.find(':'));
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    const std::string path = std::string(home) + "/.kube/config";
    std::error_code error;
    if (std::filesystem::exists(path, error)) {
      return path;
    }
  }
  return "";  // in-cluster
}

}  // namespace

const char* commandName(Command command) {
  switch (command) {
    case Command::Status:
      return "status";
    case Command::Why:
      return "why";
    case Command::Backends:
      return "backends";
  }
  return "status";
}

namespace {

// The command line as FlagSet reads it (kubectl's -o and -n spelled as ours), and the
// positional arguments taken out of it: the command and its pod.
struct SplitArguments {
  std::vector<std::string> arguments;
  std::vector<std::string> positional;
};

SplitArguments splitArguments(int argc, const char* const* argv) {
  SplitArguments out;
  out.arguments.emplace_back(argc > 0 ? argv[0] : kProgram);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-o" || arg == "-n") {
      arg = arg == "-o" ? "--output" : "--namespace";
    } else if (arg.rfind("-o", 0) == 0 && arg.size() > 2 && arg[2] != '-') {
      arg = "--output=" + arg.substr(arg[2] == '=' ? 3 : 2);
    } else if (arg.rfind("-n", 0) == 0 && arg.size() > 2 && arg[2] != '-') {
      arg = "--namespace=" + arg.substr(arg[2] == '=' ? 3 : 2);
    } else if (arg.empty() || arg[0] != '-') {
      out.positional.push_back(arg);
      continue;
    }
    out.arguments.push_back(arg);
    if (arg.find('=') == std::string::npos && !isBoolFlag(arg) && i + 1 < argc) {
      out.arguments.emplace_back(argv[++i]);
    }
  }
  return out;
}

// The command (status when none) and, for why, its pod (NAME or pod/NAME, as kubectl
// writes it); nothing more.
Result<void> parseCommand(const std::vector<std::string>& positional, Options& options) {
  const std::string command = positional.empty() ? "status" : positional.front();
  if (command == "status") {
    options.command = Command::Status;
  } else if (command == "backends") {
    options.command = Command::Backends;
  } else if (command == "why") {
    options.command = Command::Why;
    if (positional.size() < 2) {
      return fail("why: needs a pod name (kubectl gvirtus why POD)");
    }
    options.pod = positional[1];
    if (auto slash = options.pod.find('/'); slash != std::string::npos) {
      if (options.pod.substr(0, slash) != "pod" && options.pod.substr(0, slash) != "pods") {
        return fail("why: expected a pod, got \"" + options.pod + "\"");
      }
      options.pod = options.pod.substr(slash + 1);
    }
  } else {
    return fail("unknown command \"" + command + "\" (status, why POD, backends; see --help)");
  }
  const size_t expected = options.command == Command::Why ? 2 : 1;
  if (positional.size() > expected) {
    return fail(std::string(commandName(options.command)) + ": unexpected argument \"" +
                positional[expected] + "\"");
  }
  return {};
}

}  // namespace

std::expected<Options, int> parseOptions(int argc, const char* const* argv) {
  Options options;
  options.kubeconfig = defaultKubeconfig();
  std::string output = "text";
  FlagSet flags(kProgram,
                "kubectl gvirtus: what GVirtuS does on this cluster.\n\n"
                "Commands:\n"
                "  status      backends (node, load, sessions, GPUs, ready) and the pods waiting\n"
                "              for one, with the reason (the default command)\n"
                "  why POD     the pod's backend, or the reason it waits (-n NAMESPACE)\n"
                "  backends    the backends as a table\n\n"
                "Usage: kubectl gvirtus COMMAND [POD] [-n NAMESPACE] [-o text|json] [flags]");
  flags.addString("kubeconfig", &options.kubeconfig,
                  "kubeconfig file (default: the first of $KUBECONFIG, else ~/.kube/config, "
                  "else in-cluster)");
  flags.addString("context", &options.context, "kubeconfig context (default: the current one)");
  flags.addString("namespace", &options.ns,
                  "namespace of the pod for why (-n; default: the context's, else default)");
  flags.addString("output", &output, "text or json (-o)");
  flags.addString("backend-namespace", &options.backendNamespace,
                  "namespace of the GVirtuS backend pods");
  flags.addString("backend-selector", &options.backendSelector,
                  "label selector of the GVirtuS backend pods");
  flags.addInt("backend-port", &options.backendPort, "TCP port of the GVirtuS backends", 1, 65535);
  // The logger's flags; no health listener (addCommonFlags would add one).
  CommonOptions common;
  common.logLevel = "warn";
  flags.addString("log-level", &common.logLevel, "debug, info, warn or error");
  flags.addString("log-format", &common.logFormat, "text or json");

  auto [args, positional] = splitArguments(argc, argv);
  std::vector<const char*> cargs;
  for (const auto& a : args) {
    cargs.push_back(a.c_str());
  }
  if (auto code = parseCommandLine(flags, common, static_cast<int>(cargs.size()), cargs.data())) {
    return std::unexpected(*code);
  }

  if (output == "json") {
    options.output = Output::Json;
  } else if (output != "text" && output != "wide") {
    return std::unexpected(
        usageError(flags, "--output: must be text or json, got \"" + output + "\""));
  }
  if (auto command = parseCommand(positional, options); !command) {
    return std::unexpected(usageError(flags, command.error().message));
  }
  return options;
}

}  // namespace gvirtus::kubectl_gvirtus
