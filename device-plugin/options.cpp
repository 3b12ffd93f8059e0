#include "device-plugin/options.h"

#include <sys/un.h>

#include <filesystem>

#include "common/contract/gvirtus_properties.h"
#include "common/kube/api/object_names.h"

namespace gvirtus::device_plugin {
namespace {

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

Result<void> validateOptions(const Options& options) {
  if (auto valid = validateExtendedResourceName(options.resource); !valid) {
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
