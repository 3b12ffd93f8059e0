#include "common/health/server.h"

#include <exception>

#include "common/telemetry/log.h"

namespace gvirtus {

namespace {

constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace

HealthServer::HealthServer(PassKey, std::unique_ptr<HttpServer> server,
                           const MetricsRegistry& metrics)
    : server_(std::move(server)), metrics_(metrics) {}

HealthServer::~HealthServer() {
  stop();
}

Result<std::unique_ptr<HealthServer>> HealthServer::create(const std::string& address,
                                                           const MetricsRegistry& metrics) {
  if (address.empty()) {
    return std::make_unique<HealthServer>(PassKey{}, nullptr, metrics);
  }
  HttpServerOptions options;
  options.address = address;
  options.name = "health";
  options.workers = 4;
  options.maxQueued = 32;
  options.maxBodyBytes = 64 * 1024;
  options.readTimeout = std::chrono::seconds(5);
  options.writeTimeout = std::chrono::seconds(10);
  options.keepAliveTimeout = std::chrono::seconds(30);
  auto server = HttpServer::create(std::move(options));
  if (!server) {
    return fail(server.error().context("health server"));
  }
  auto health = std::make_unique<HealthServer>(PassKey{}, std::move(*server), metrics);
  HealthServer* self = health.get();
  self->server_->handle("GET", "/healthz",
                        [self](const HttpRequest&) { return self->answer(true); });
  self->server_->handle("GET", "/readyz",
                        [self](const HttpRequest&) { return self->answer(false); });
  self->server_->handle("GET", "/metrics", [self](const HttpRequest&) {
    HttpResponse response;
    response.body = self->metrics_.render();
    response.contentType = kMetricsContentType;
    return response;
  });
  return health;
}

void HealthServer::setLivenessCheck(Check check) {
  std::lock_guard lock(mutex_);
  liveness_ = std::move(check);
}

void HealthServer::setReadinessCheck(Check check) {
  std::lock_guard lock(mutex_);
  readiness_ = std::move(check);
}

HttpResponse HealthServer::answer(bool liveness) const {
  Check check;
  {
    std::lock_guard lock(mutex_);
    check = liveness ? liveness_ : readiness_;
  }
  Result<void> result;
  try {
    if (check) {
      result = check();
    }
  } catch (const std::exception& e) {
    result = fail(std::string("check failed: ") + e.what());
  } catch (...) {
    result = fail("check failed");
  }
  HttpResponse response;
  if (result) {
    response.body = "ok\n";
  } else {
    response.status = 503;
    response.body = result.error().message + "\n";
  }
  return response;
}

Result<void> HealthServer::start() {
  if (!server_) {
    return {};
  }
  if (auto r = server_->start(); !r) {
    return fail(r.error().context("health server"));
  }
  return {};
}

void HealthServer::stop() {
  if (server_) {
    server_->stop();
  }
}

int HealthServer::port() const {
  return server_ ? server_->port() : 0;
}

}  // namespace gvirtus
