#include "device-plugin/options.h"

#include <sys/un.h>

#include <filesystem>

#include "common/gvirtus_properties.h"

namespace gvirtus::device_plugin {
namespace {

bool isLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool isAlnum(char c) {
  return isLowerAlnum(c) || (c >= 'A' && c <= 'Z');
}

// A DNS-1123 label: lowercase letters, digits and '-', starting and ending alphanumeric.
bool isDnsLabel(std::string_view label) {
  if (label.empty() || label.size() > 63) {
    return false;
  }
  if (!isLowerAlnum(label.front()) || !isLowerAlnum(label.back())) {
    return false;
  }
  for (char c : label) {
    if (!isLowerAlnum(c) && c != '-') {
      return false;
    }
  }
  return true;
}

// A DNS-1123 subdomain: dot-separated labels, at most 253 characters.
bool isDnsSubdomain(std::string_view name) {
  if (name.empty() || name.size() > 253) {
    return false;
  }
  size_t start = 0;
  while (true) {
    const size_t dot = name.find('.', start);
    if (!isDnsLabel(name.substr(start, dot - start))) {
      return false;
    }
    if (dot == std::string_view::npos) {
      return true;
    }
    start = dot + 1;
  }
}

// The name part of a Kubernetes qualified name.
bool isQualifiedNamePart(std::string_view name) {
  if (name.empty() || name.size() > 63) {
    return false;
  }
  if (!isAlnum(name.front()) || !isAlnum(name.back())) {
    return false;
  }
  for (char c : name) {
    if (!isAlnum(c) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

// A socket in `dir` named `name` whose path fits a unix socket address.
Result<void> socketPathFits(const std::string& flag, const std::string& dir,
                            const std::string& name) {
  if (dir.empty()) {
    return fail(flag + ": must not be empty");
  }
  std::error_code ec;
  const auto path = std::filesystem::absolute(dir, ec) / name;
  if (path.string().size() >= sizeof(sockaddr_un{}.sun_path)) {
    return fail(flag + ": the socket path " + path.string() + " is longer than the " +
                std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) +
                " bytes a unix socket path may have");
  }
  return {};
}

}  // namespace

Result<void> validateResourceName(std::string_view name) {
  const std::string quoted = "\"" + std::string(name) + "\"";
  const size_t slash = name.find('/');
  if (slash == std::string_view::npos || name.find('/', slash + 1) != std::string_view::npos) {
    return fail("must be DOMAIN/NAME (an extended resource such as nvidia.com/gpu), got " + quoted);
  }
  const std::string_view domain = name.substr(0, slash);
  const std::string_view local = name.substr(slash + 1);
  // The kubelet checks "requests." + name as a qualified name, so the domain loses 9.
  if (!isDnsSubdomain(domain) || domain.size() > 253 - 9) {
    return fail("domain \"" + std::string(domain) +
                "\" is not a DNS subdomain (lowercase letters, digits, '-' and '.'), in " + quoted);
  }
  if (domain.starts_with("requests.")) {
    return fail("the domain must not start with \"requests.\", got " + quoted);
  }
  if (domain == "kubernetes.io" || domain.ends_with(".kubernetes.io")) {
    return fail("the kubernetes.io domains hold native resources, not device plugins', got " +
                quoted);
  }
  if (!isQualifiedNamePart(local)) {
    return fail("name \"" + std::string(local) +
                "\" must be 1-63 letters, digits, '-', '_' or '.', starting and ending with a "
                "letter or digit, in " +
                quoted);
  }
  return {};
}

Result<void> validateOptions(const Options& options) {
  if (auto valid = validateResourceName(options.resource); !valid) {
    return fail(valid.error().context("--resource"));
  }
  if (options.devices < 1 || options.devices > kMaxDevices) {
    return fail("--devices: must be between 1 and " + std::to_string(kMaxDevices) + ", got " +
                std::to_string(options.devices));
  }
  if (options.kubeletDir.empty()) {
    return fail("--kubelet-dir: must not be empty");
  }
  const std::string& socket = options.socketName;
  if (socket.empty() || socket == "." || socket == ".." || socket.find('/') != std::string::npos) {
    return fail("--socket-name: must be a file name in --kubelet-dir, without '/', got \"" +
                socket + "\"");
  }
  if (socket == "kubelet.sock") {
    return fail("--socket-name: kubelet.sock is the kubelet's own socket");
  }
  if (auto fits = socketPathFits("--socket-name", options.kubeletDir, socket); !fits) {
    return fits;
  }
  if (options.cdi && options.cdiDir.empty()) {
    return fail("--cdi-dir: must not be empty while --cdi is on");
  }
  if (options.dra) {
    if (!options.cdi) {
      return fail("--dra: needs --cdi: a prepared claim reaches its containers through CDI");
    }
    if (auto fits = socketPathFits("--dra-dir", options.draDir, kDraSocketName); !fits) {
      return fits;
    }
    if (auto fits = socketPathFits("--plugins-registry-dir", options.pluginsRegistryDir,
                                   kDraRegistrationSocketName);
        !fits) {
      return fits;
    }
  }
  return {};
}

std::expected<Options, int> parseOptions(int argc, const char* const* argv) {
  Options options;
  options.plugins = defaultPlugins();
  FlagSet flags(kProgram,
                "Kubelet device plugin for GVirtuS frontend nodes without a GPU: advertises "
                "virtual GPUs as an\nextended resource, so that GPU pods can run there and "
                "reach a remote GPU through GVirtuS.\nRe-registers whenever the kubelet "
                "restarts, and writes the CDI spec of its devices.");
  addCommonFlags(flags, options.common);
  flags.addString("kubelet-dir", &options.kubeletDir,
                  "the kubelet's device plugin folder, where kubelet.sock and our socket live");
  flags.addString("resource", &options.resource,
                  "extended resource the virtual GPUs are advertised as (DOMAIN/NAME)");
  flags.addInt("devices", &options.devices, "number of virtual GPUs to advertise", 1, kMaxDevices);
  flags.addBool("cdi", &options.cdi,
                "write a CDI spec of kind gvirtus.io/vgpu and name its devices in Allocate");
  flags.addString("cdi-dir", &options.cdiDir, "folder the CDI spec is written to");
  flags.addString("socket-name", &options.socketName,
                  "file name of our gRPC socket inside --kubelet-dir");
  flags.addBool("dra", &options.dra,
                "also serve the kubelet as the DRA driver gpu.gvirtus.io: prepare the claims "
                "allocated its\ndevices (properties.json and a CDI spec per claim; reads "
                "ResourceClaims and ResourceSlices)");
  flags.addString("dra-dir", &options.draDir,
                  "with --dra: folder of the DRA socket and of the prepared claims' files "
                  "(the same path on the host)");
  flags.addString("plugins-registry-dir", &options.pluginsRegistryDir,
                  "with --dra: the kubelet's plugin registration folder");
  flags.addList(
      "plugins", &options.plugins,
      "with --dra: GVirtuS frontend plugins listed in a prepared claim's properties.json");
  addKubeApiFlags(flags, options.kubeApi, "with --dra: reads of claims and slices");

  if (auto stop = parseCommandLine(flags, options.common, argc, argv)) {
    return std::unexpected(*stop);
  }
  if (!flags.rest().empty()) {
    return std::unexpected(
        usageError(flags, "unexpected argument \"" + flags.rest().front() + "\" after --"));
  }
  if (auto valid = validateOptions(options); !valid) {
    return std::unexpected(usageError(flags, valid.error().message));
  }
  return options;
}

}  // namespace gvirtus::device_plugin
