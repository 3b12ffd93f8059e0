#include "device-plugin/run.h"

#include <atomic>
#include <cstdio>
#include <filesystem>

#include "common/health_server.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/signals.h"
#include "device-plugin/cdi_spec.h"
#include "device-plugin/device_list.h"
#include "device-plugin/options.h"
#include "device-plugin/plugin_server.h"
#include "device-plugin/plugin_supervisor.h"

namespace gvirtus::device_plugin {
namespace {

void registerMetrics(MetricsRegistry& registry, const DeviceList& devices,
                     const PluginCounters& counters) {
  registry.registerProcessMetrics();
  const double count = static_cast<double>(devices.ids().size());
  registry.gaugeFunction("gvirtus_device_plugin_devices", "Virtual GPUs advertised to the kubelet.",
                         [count] { return count; });
  registry.gaugeFunction("gvirtus_device_plugin_registered",
                         "1 while registered with the running kubelet, else 0.",
                         [&counters] { return counters.registered.load() ? 1.0 : 0.0; });
  registry.counterFunction(
      "gvirtus_device_plugin_registrations_total", "Successful registrations with the kubelet.",
      [&counters] { return static_cast<double>(counters.registrations.load()); });
  registry.counterFunction(
      "gvirtus_device_plugin_allocations_total", "Containers given virtual GPUs by Allocate.",
      [&counters] { return static_cast<double>(counters.allocations.load()); });
  registry.counterFunction(
      "gvirtus_device_plugin_rejected_allocations_total", "Allocate requests rejected as invalid.",
      [&counters] { return static_cast<double>(counters.rejectedAllocations.load()); });
  registry.counterFunction("gvirtus_device_plugin_list_and_watch_streams_total",
                           "ListAndWatch streams the kubelet opened.", [&counters] {
                             return static_cast<double>(counters.listAndWatchStreams.load());
                           });
}

}  // namespace

int run(const Options& options) {
  // First, before any thread starts: every thread inherits the blocked signals.
  ShutdownSignal& shutdown = ShutdownSignal::install();

  std::error_code ec;
  const std::filesystem::path kubeletDir = std::filesystem::absolute(options.kubeletDir, ec);
  if (ec || !std::filesystem::is_directory(kubeletDir, ec)) {
    return configurationError(kProgram,
                              "--kubelet-dir: " + kubeletDir.string() + " is not a folder");
  }

  DeviceList devices(options.devices);
  MetricsRegistry registry;
  PluginCounters counters;
  registerMetrics(registry, devices, counters);
  auto health = HealthServer::create(options.common.healthAddr, registry);
  if (!health) {
    return configurationError(kProgram, "--health-addr: " + health.error().message);
  }
  (*health)->setReadinessCheck([&counters]() -> Result<void> {
    if (counters.registered.load()) {
      return {};
    }
    return fail("not registered with the kubelet");
  });

  std::string cdiSpec;
  if (options.cdi) {
    auto written = writeCdiSpec(options.cdiDir, devices.ids());
    if (!written) {
      return configurationError(kProgram,
                                "--cdi-dir: cannot write the CDI spec: " + written.error().message);
    }
    cdiSpec = written->string();
  }
  if (auto started = (*health)->start(); !started) {
    return configurationError(kProgram, "--health-addr: " + started.error().message);
  }
  // Every configuration error has been reported above, in one line and nothing before it.
  log::info("starting", {{"version", GVIRTUS_VERSION},
                         {"resource", options.resource},
                         {"devices", options.devices},
                         {"socket", (kubeletDir / options.socketName).string()},
                         {"cdiSpec", cdiSpec.empty() ? "off" : cdiSpec},
                         {"cdiKind", kCdiKind}});

  SupervisorConfig config;
  config.kubeletDir = kubeletDir;
  config.socketName = options.socketName;
  config.resource = options.resource;
  config.cdi = options.cdi;
  PluginSupervisor supervisor(std::move(config), devices, counters);
  auto ran = supervisor.run(shutdown.token());
  (*health)->stop();
  if (!ran) {
    log::error("device plugin failed", {{"error", ran.error().message}});
    return kExitFatal;
  }
  return kExitOk;
}

}  // namespace gvirtus::device_plugin
