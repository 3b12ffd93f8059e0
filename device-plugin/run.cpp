#include "device-plugin/run.h"

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "common/health/server.h"
#include "common/kube/connect.h"
#include "common/process/signals.h"
#include "common/telemetry/log.h"
#include "common/telemetry/metrics.h"
#include "device-plugin/cdi/spec.h"
#include "device-plugin/dra/claim_files.h"
#include "device-plugin/dra/claim_preparer.h"
#include "device-plugin/dra/server.h"
#include "device-plugin/options.h"
#include "device-plugin/plugin/device_list.h"
#include "device-plugin/plugin/server.h"
#include "device-plugin/plugin/supervisor.h"

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

void registerDraMetrics(MetricsRegistry& registry, const ClaimFiles& files,
                        const DraCounters& counters) {
  registry.gaugeFunction("gvirtus_device_plugin_dra_registered",
                         "1 while the kubelet has the DRA driver gpu.gvirtus.io registered.",
                         [&counters] { return counters.registered.load() ? 1.0 : 0.0; });
  registry.gaugeFunction("gvirtus_device_plugin_dra_prepared_claims",
                         "Claims prepared on this node (their files are on disk).",
                         [&files] { return static_cast<double>(files.preparedClaims().size()); });
  registry.counterFunction("gvirtus_device_plugin_dra_prepares_total",
                           "Claims prepared for the kubelet.",
                           [&counters] { return static_cast<double>(counters.prepared.load()); });
  registry.counterFunction(
      "gvirtus_device_plugin_dra_prepare_errors_total",
      "Claims the kubelet asked to prepare that could not be (the kubelet retries).",
      [&counters] { return static_cast<double>(counters.prepareErrors.load()); });
  registry.counterFunction("gvirtus_device_plugin_dra_unprepares_total",
                           "Claims unprepared for the kubelet.",
                           [&counters] { return static_cast<double>(counters.unprepared.load()); });
}

// What --dra adds: the API client, the claims' files and the preparer the server calls.
struct DraDriver {
  std::unique_ptr<KubeClient> client;
  std::unique_ptr<ClaimSource> source;
  std::unique_ptr<ClaimFiles> files;
  std::unique_ptr<ClaimPreparer> preparer;
  DraServer::Config config;
  DraCounters counters;
};

Result<std::unique_ptr<DraDriver>> draDriver(const Options& options, ShutdownSignal& shutdown) {
  std::error_code ec;
  const auto draDir = std::filesystem::absolute(options.draDir, ec);
  const auto registry = std::filesystem::absolute(options.pluginsRegistryDir, ec);
  const auto cdiDir = std::filesystem::absolute(options.cdiDir, ec);
  KubeClientOptions clientOptions;
  options.kubeApi.applyTo(clientOptions);
  clientOptions.cancel = shutdown.deadline(kShutdownClientGrace);
  auto client = connectKubeClient(kProgram, options.common.kubeconfig, clientOptions);
  if (!client) {
    return fail(client.error());
  }
  auto driver = std::make_unique<DraDriver>();
  driver->client = std::move(*client);
  driver->source = apiClaimSource(*driver->client);
  driver->files = std::make_unique<ClaimFiles>(draDir, cdiDir);
  driver->preparer =
      std::make_unique<ClaimPreparer>(*driver->source, *driver->files, options.plugins);
  driver->config = {registry / kDraRegistrationSocketName, draDir / kDraSocketName};
  return driver;
}

SupervisorConfig supervisorConfig(const Options& options, const std::filesystem::path& kubeletDir) {
  SupervisorConfig config;
  config.kubeletDir = kubeletDir;
  config.socketName = options.socketName;
  config.resource = options.resource;
  config.cdi = options.cdi;
  return config;
}

void logStarting(const Options& options, const std::filesystem::path& kubeletDir,
                 const std::string& cdiSpec, const DraDriver* dra) {
  log::info("starting",
            {{"version", GVIRTUS_VERSION},
             {"resource", options.resource},
             {"devices", options.devices},
             {"socket", (kubeletDir / options.socketName).string()},
             {"cdiSpec", cdiSpec.empty() ? "off" : cdiSpec},
             {"cdiKind", kCdiKind},
             {"dra", dra != nullptr ? dra->config.pluginSocket.string() : "off"},
             {"preparedClaims", dra != nullptr ? dra->files->preparedClaims().size() : 0}});
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
  std::unique_ptr<DraDriver> dra;
  if (options.dra) {
    auto made = draDriver(options, shutdown);
    if (!made) {
      return configurationError(kProgram, "--dra: " + made.error().message);
    }
    dra = std::move(*made);
    registerDraMetrics(registry, *dra->files, dra->counters);
  }
  (*health)->setReadinessCheck([&counters, &dra]() -> Result<void> {
    if (!counters.registered.load()) {
      return fail("not registered with the kubelet");
    }
    if (dra && !dra->counters.registered.load()) {
      return fail("the DRA driver is not registered with the kubelet");
    }
    return {};
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
  logStarting(options, kubeletDir, cdiSpec, dra.get());

  PluginSupervisor supervisor(supervisorConfig(options, kubeletDir), devices, counters);
  std::jthread draThread;
  if (dra) {
    // Its own stop token: stopped below once the device plugin stops, for whatever reason.
    draThread = std::jthread([&dra](std::stop_token stop) {
      serveDra(dra->config, *dra->preparer, dra->counters, stop);
    });
  }
  auto ran = supervisor.run(shutdown.token());
  if (draThread.joinable()) {
    draThread.request_stop();
    draThread.join();
  }
  (*health)->stop();
  if (!ran) {
    log::error("device plugin failed", {{"error", ran.error().message}});
    return kExitFatal;
  }
  return kExitOk;
}

}  // namespace gvirtus::device_plugin
