#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/base/error.h"
#include "common/time/duration.h"
#include "webhook/placement/source.h"

namespace gvirtus::webhook {

// One entry of --static-backends: a dotted IPv4 address or a host name, and a port.
struct StaticBackendSpec {
  std::string host;
  int port = 0;
  bool operator==(const StaticBackendSpec&) const = default;
};

// Parses "HOST:PORT" items; the error names the item. A host given as IPv6 is refused
// (GVirtuS takes IPv4 only).
Result<std::vector<StaticBackendSpec>> parseStaticBackends(const std::vector<std::string>& items);

// Host name -> IPv4 addresses (Ipv4Resolver::resolve in production).
using ResolveFunction = std::function<Result<std::vector<std::string>>(const std::string& host)>;

// Backends outside the cluster. Every address a host resolves to is a backend. Names are
// resolved at start() and again every `refresh` (GVirtuS takes only IPs, and the addresses
// behind a name change); a failed resolution keeps the host's previous addresses and is
// logged. Static backends have no load report.
class StaticBackendSource : public BackendSource {
 public:
  StaticBackendSource(std::vector<StaticBackendSpec> specs, ResolveFunction resolve,
                      Duration refresh = std::chrono::minutes(1));
  ~StaticBackendSource() override;

  void setOnChange(std::function<void()> onChange) override;
  // Resolves every host once (so ready() holds when it returns), then re-resolves on a
  // thread of its own.
  void start() override;
  void stop() override;
  bool ready() const override;
  BackendSnapshot backends() const override;

  // One pass over the hosts; for tests and start().
  void resolveAll();

 private:
  const std::vector<StaticBackendSpec> specs_;
  const ResolveFunction resolve_;
  const Duration refresh_;
  std::function<void()> onChange_;

  mutable std::mutex mutex_;
  std::map<std::string, std::vector<std::string>> addresses_;  // host -> IPv4 addresses
  bool resolved_ = false;
  std::jthread thread_;
};

}  // namespace gvirtus::webhook
