#include "device-plugin/plugin/supervisor.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/telemetry/log.h"
#include "device-plugin/plugin/kubelet_registration.h"
#include "device-plugin/plugin/kubelet_watcher.h"

namespace gvirtus::device_plugin {

bool FileIdentity::operator==(const FileIdentity& other) const {
  return sameFile(other) && changed.tv_sec == other.changed.tv_sec &&
         changed.tv_nsec == other.changed.tv_nsec;
}

namespace {

bool sameFile(const std::optional<FileIdentity>& a, const std::optional<FileIdentity>& b) {
  return a && b && a->sameFile(*b);
}

}  // namespace

std::optional<FileIdentity> identify(const std::filesystem::path& path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) {
    return std::nullopt;
  }
  return FileIdentity{info.st_dev, info.st_ino, info.st_ctim};
}

PluginSupervisor::PluginSupervisor(SupervisorConfig config, const DeviceList& devices,
                                   PluginCounters& counters, std::function<void(bool)> onReady)
    : config_(std::move(config)),
      devices_(devices),
      counters_(counters),
      onReady_(std::move(onReady)),
      retry_(config_.retryInitial, config_.retryMax) {}

PluginSupervisor::~PluginSupervisor() {
  stopServing();
}

std::filesystem::path PluginSupervisor::socketPath() const {
  return config_.kubeletDir / config_.socketName;
}

std::filesystem::path PluginSupervisor::kubeletSocketPath() const {
  return config_.kubeletDir / KubeletWatcher::kKubeletSocket;
}

// gRPC binds a private name in the same folder, which is then renamed over ours: our
// name never points at nothing while a stale socket is replaced, and gRPC, which unlinks
// the path it bound when it stops, can only ever unlink that private name.
Result<void> PluginSupervisor::serve() {
  const std::filesystem::path staging =
      config_.kubeletDir / ("." + config_.socketName + "." + std::to_string(::getpid()));
  std::error_code ignored;
  std::filesystem::remove(staging, ignored);
  auto server = PluginServer::start({staging, config_.cdi}, devices_, counters_);
  if (!server) {
    return fail(server.error());
  }
  const bool replacing = identify(socketPath()).has_value();
  if (std::rename(staging.c_str(), socketPath().c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::filesystem::remove(staging, ignored);
    return fail("rename " + staging.string() + " to " + socketPath().string() + ": " + reason);
  }
  server_ = std::move(*server);
  served_ = identify(socketPath());
  steppedBack_ = false;
  log::info(replacing ? "serving; replaced the socket left under our name" : "serving",
            {{"socket", socketPath().string()}, {"devices", devices_.ids().size()}});
  return {};
}

void PluginSupervisor::stopServing() {
  server_.reset();
  if (sameFile(identify(socketPath()), served_)) {
    std::error_code ignored;
    std::filesystem::remove(socketPath(), ignored);
  }
  served_.reset();
}

void PluginSupervisor::setRegistered(bool registered) {
  if (!registered) {
    registeredWith_.reset();
  }
  if (registered != registered_) {
    registered_ = registered;
    counters_.registered = registered;
    if (onReady_) {
      onReady_(registered);
    }
  }
}

void PluginSupervisor::reconcileServing() {
  const auto current = identify(socketPath());
  if (server_) {
    if (sameFile(current, served_)) {
      return;
    }
    if (current) {
      log::warn("another process put its socket under our name; stepping back until it is gone",
                {{"socket", socketPath().string()}});
      stopServing();
      steppedBack_ = true;
      setRegistered(false);
      return;
    }
    log::info("our socket is gone (the kubelet restarts?); serving again",
              {{"socket", socketPath().string()}});
    stopServing();
    setRegistered(false);
  } else if (steppedBack_ && current) {
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (retryAt_ && now < *retryAt_) {
    return;
  }
  if (auto served = serve(); !served) {
    const Duration delay = retry_.next();
    log::error("cannot serve; retrying",
               {{"error", served.error().message}, {"retryIn", formatDuration(delay)}});
    retryAt_ = now + delay;
    return;
  }
  // A new socket: the kubelet must hear of it, at once.
  retryAt_.reset();
  retry_.reset();
  setRegistered(false);
}

void PluginSupervisor::reconcileRegistration() {
  const auto kubelet = identify(kubeletSocketPath());
  if (!kubelet) {
    if (registered_) {
      log::warn("kubelet.sock is gone; waiting for the kubelet",
                {{"socket", kubeletSocketPath().string()}});
    }
    setRegistered(false);
    retryAt_.reset();  // its creation wakes us
    return;
  }
  // Registered with this very kubelet.sock already: an event about its creation was late.
  if (registered_ && registeredWith_ == kubelet) {
    return;
  }
  if (registered_) {
    log::info("the kubelet restarted; registering again");
    setRegistered(false);
  }
  const auto now = std::chrono::steady_clock::now();
  if (retryAt_ && now < *retryAt_) {
    return;
  }
  auto done = registerWithKubelet(kubeletSocketPath(), {config_.socketName, config_.resource},
                                  config_.registerTimeout);
  if (!done) {
    const Duration delay = retry_.next();
    log::warn("registration failed; retrying",
              {{"error", done.error().message}, {"retryIn", formatDuration(delay)}});
    retryAt_ = now + delay;
    return;
  }
  counters_.registrations.fetch_add(1);
  retry_.reset();
  retryAt_.reset();
  setRegistered(true);
  registeredWith_ = kubelet;
  log::info("registered with the kubelet", {{"resource", config_.resource},
                                            {"endpoint", config_.socketName},
                                            {"devices", devices_.ids().size()}});
}

void PluginSupervisor::reconcile(bool kubeletRestarted) {
  if (kubeletRestarted) {
    retryAt_.reset();
  }
  reconcileServing();
  if (server_) {
    reconcileRegistration();
  }
}

Duration PluginSupervisor::nextPassIn() const {
  if (!retryAt_) {
    return config_.resyncInterval;
  }
  const auto left =
      std::chrono::duration_cast<Duration>(*retryAt_ - std::chrono::steady_clock::now());
  return std::clamp(left, Duration::zero(), config_.resyncInterval);
}

Result<void> PluginSupervisor::run(std::stop_token stop) {
  auto watcher = KubeletWatcher::open(config_.kubeletDir, config_.socketName);
  if (!watcher) {
    return fail(watcher.error().context("watch the kubelet folder"));
  }
  if (auto served = serve(); !served) {
    return fail(served.error());
  }
  bool kubeletRestarted = false;
  while (!stop.stop_requested()) {
    reconcile(kubeletRestarted);
    auto events = watcher->wait(nextPassIn(), stop);
    if (!events) {
      return fail(events.error());
    }
    kubeletRestarted = events->kubeletSocketCreated || events->overflow;
    if (events->any()) {
      log::debug("the kubelet folder changed",
                 {{"kubeletSocketCreated", events->kubeletSocketCreated},
                  {"kubeletSocketRemoved", events->kubeletSocketRemoved},
                  {"pluginSocketRemoved", events->pluginSocketRemoved},
                  {"overflow", events->overflow}});
    }
  }
  stopServing();
  setRegistered(false);
  log::info("stopped serving", {{"socket", socketPath().string()}});
  return {};
}

}  // namespace gvirtus::device_plugin
