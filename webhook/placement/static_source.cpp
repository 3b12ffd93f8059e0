#include "webhook/placement/static_source.h"

#include <algorithm>
#include <charconv>

#include "common/net/ipv4_resolver.h"
#include "common/telemetry/log.h"
#include "common/time/stoppable_sleep.h"

namespace gvirtus::webhook {

Result<std::vector<StaticBackendSpec>> parseStaticBackends(const std::vector<std::string>& items) {
  std::vector<StaticBackendSpec> specs;
  for (const auto& item : items) {
    const auto colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return fail("\"" + item + "\" is not HOST:PORT");
    }
    const std::string host = item.substr(0, colon);
    if (host.find(':') != std::string::npos || host.front() == '[') {
      return fail("\"" + item + "\": GVirtuS takes IPv4 addresses only");
    }
    const std::string portText = item.substr(colon + 1);
    int port = 0;
    auto [end, ec] = std::from_chars(portText.data(), portText.data() + portText.size(), port);
    if (ec != std::errc() || end != portText.data() + portText.size() || port < 1 || port > 65535) {
      return fail("\"" + item + "\": port must be between 1 and 65535");
    }
    if (host.find_first_of(" \t/") != std::string::npos) {
      return fail("\"" + item + "\": \"" + host + "\" is not a host name");
    }
    specs.push_back({host, port});
  }
  return specs;
}

StaticBackendSource::StaticBackendSource(std::vector<StaticBackendSpec> specs,
                                         ResolveFunction resolve, Duration refresh)
    : specs_(std::move(specs)), resolve_(std::move(resolve)), refresh_(refresh) {}

StaticBackendSource::~StaticBackendSource() {
  stop();
}

void StaticBackendSource::setOnChange(std::function<void()> onChange) {
  onChange_ = std::move(onChange);
}

void StaticBackendSource::resolveAll() {
  bool changed = false;
  for (const auto& spec : specs_) {
    {
      std::lock_guard lock(mutex_);
      if (addresses_.contains(spec.host) && isDottedIpv4(spec.host)) {
        continue;
      }
    }
    auto addresses = resolve_(spec.host);
    std::lock_guard lock(mutex_);
    if (!addresses) {
      log::warn("cannot resolve a static backend; keeping its previous addresses",
                {{"host", spec.host}, {"error", addresses.error().message}});
      continue;
    }
    auto& known = addresses_[spec.host];
    if (known != *addresses) {
      log::info("static backend resolved", {{"host", spec.host}, {"addresses", *addresses}});
      known = *addresses;
      changed = true;
    }
  }
  {
    std::lock_guard lock(mutex_);
    resolved_ = true;
  }
  if (changed && onChange_) {
    onChange_();
  }
}

void StaticBackendSource::start() {
  if (thread_.joinable()) {
    return;
  }
  resolveAll();
  thread_ = std::jthread([this](std::stop_token stop) {
    while (sleepUnlessStopped(stop, refresh_)) {
      resolveAll();
    }
  });
}

void StaticBackendSource::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

bool StaticBackendSource::ready() const {
  std::lock_guard lock(mutex_);
  return resolved_;
}

BackendSnapshot StaticBackendSource::backends() const {
  std::lock_guard lock(mutex_);
  std::vector<Backend> out;
  for (const auto& spec : specs_) {
    auto it = addresses_.find(spec.host);
    if (it == addresses_.end()) {
      continue;
    }
    for (const auto& ip : it->second) {
      Backend backend;
      backend.ip = ip;
      backend.port = spec.port;
      if (std::none_of(out.begin(), out.end(),
                       [&](const Backend& b) { return b.endpoint() == backend.endpoint(); })) {
        out.push_back(std::move(backend));
      }
    }
  }
  return std::make_shared<const std::vector<Backend>>(std::move(out));
}

}  // namespace gvirtus::webhook
