#pragma once

#include <expected>
#include <string>

#include "common/process/flags.h"

// `kubectl gvirtus COMMAND [ARG] [flags]`: the command line as a plain struct.
namespace gvirtus::kubectl_gvirtus {

inline constexpr const char* kProgram = "kubectl-gvirtus";

enum class Command { Status, Why, Backends };
enum class Output { Text, Json };

struct Options {
  Command command = Command::Status;
  std::string pod;  // why POD
  std::string ns;   // -n/--namespace of the pod (why); default: the kubeconfig's, or "default"
  Output output = Output::Text;
  std::string
      kubeconfig;  // default: $KUBECONFIG's first file, else ~/.kube/config, else in-cluster
  std::string context;
  std::string backendNamespace = "gvirtus-system";
  std::string backendSelector = "app.kubernetes.io/component=backend";
  int backendPort = 9999;
};

// Parses argv (kubectl passes the plugin its arguments as typed: `status -o json`). Short
// flags -o and -n are kubectl's. Returns the exit code when the program must stop now: 0
// after --help/--version, 2 with a one-line reason on stderr.
std::expected<Options, int> parseOptions(int argc, const char* const* argv);

const char* commandName(Command command);

}  // namespace gvirtus::kubectl_gvirtus
