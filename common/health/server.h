#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/base/error.h"
#include "common/http/server.h"
#include "common/telemetry/metrics.h"

namespace gvirtus {

// The health and metrics listener every binary runs on --health-addr (plain HTTP):
//   GET /healthz  200 "ok" while the liveness check passes, else 503 and the reason;
//   GET /readyz   200 "ok" while the readiness check passes, else 503 and the reason;
//   GET /metrics  the registry in the Prometheus text format 0.0.4.
// Checks run on the server's threads for each request and must be quick; unset checks pass.
class HealthServer {
 public:
  using Check = std::function<Result<void>()>;

  // An empty address gives a disabled server: start() and stop() do nothing and port() is
  // 0. `metrics` must outlive the server.
  static Result<std::unique_ptr<HealthServer>> create(const std::string& address,
                                                      const MetricsRegistry& metrics);
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  void setLivenessCheck(Check check);
  void setReadinessCheck(Check check);

  Result<void> start();
  void stop();
  int port() const;
  bool enabled() const { return server_ != nullptr; }

  // Only create() can name the key.
  class PassKey {
    friend class HealthServer;
    explicit PassKey() = default;
  };
  HealthServer(PassKey, std::unique_ptr<HttpServer> server, const MetricsRegistry& metrics);

 private:
  HttpResponse answer(bool liveness) const;

  std::unique_ptr<HttpServer> server_;
  const MetricsRegistry& metrics_;
  mutable std::mutex mutex_;
  Check liveness_;
  Check readiness_;
};

}  // namespace gvirtus
