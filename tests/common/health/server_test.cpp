#include "common/health/server.h"

#include <httplib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>

namespace gvirtus {

TEST_CASE("HealthServer serves /healthz, /readyz and /metrics", "[health_server]") {
  MetricsRegistry metrics;
  metrics.counter("gvirtus_test_total", "A test counter.").inc(3);
  auto created = HealthServer::create("127.0.0.1:0", metrics);
  REQUIRE(created);
  auto& health = **created;
  CHECK(health.enabled());

  std::atomic<bool> ready{false};
  health.setReadinessCheck([&]() -> Result<void> {
    if (!ready) {
      return fail("waiting for the first backend list");
    }
    return {};
  });
  REQUIRE(health.start());
  REQUIRE(health.port() > 0);
  httplib::Client client("127.0.0.1", health.port());

  auto live = client.Get("/healthz");
  REQUIRE(live);
  CHECK(live->status == 200);
  CHECK(live->body == "ok\n");

  auto notReady = client.Get("/readyz");
  REQUIRE(notReady);
  CHECK(notReady->status == 503);
  CHECK(notReady->body.find("waiting for the first backend list") != std::string::npos);

  ready = true;
  auto isReady = client.Get("/readyz");
  REQUIRE(isReady);
  CHECK(isReady->status == 200);
  CHECK(isReady->body == "ok\n");

  ready = false;
  auto notReadyAgain = client.Get("/readyz");
  REQUIRE(notReadyAgain);
  CHECK(notReadyAgain->status == 503);

  auto scrape = client.Get("/metrics");
  REQUIRE(scrape);
  CHECK(scrape->status == 200);
  CHECK(scrape->get_header_value("Content-Type") == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(scrape->body.find("# TYPE gvirtus_test_total counter\ngvirtus_test_total 3\n") !=
        std::string::npos);

  // Metrics registered after start show up in the next scrape.
  metrics.gauge("gvirtus_late", "Registered late.").set(2);
  auto again = client.Get("/metrics");
  REQUIRE(again);
  CHECK(again->body.find("gvirtus_late 2\n") != std::string::npos);

  CHECK(client.Get("/other")->status == 404);
  CHECK(client.Post("/healthz", "x", "text/plain")->status == 405);
  health.stop();
}

TEST_CASE("HealthServer liveness failures and throwing checks give 503", "[health_server]") {
  MetricsRegistry metrics;
  auto created = HealthServer::create("127.0.0.1:0", metrics);
  REQUIRE(created);
  auto& health = **created;
  health.setLivenessCheck([]() -> Result<void> { return fail("watch stalled for 5m"); });
  health.setReadinessCheck([]() -> Result<void> { throw std::runtime_error("bug"); });
  REQUIRE(health.start());
  httplib::Client client("127.0.0.1", health.port());
  auto live = client.Get("/healthz");
  REQUIRE(live);
  CHECK(live->status == 503);
  CHECK(live->body == "watch stalled for 5m\n");
  auto ready = client.Get("/readyz");
  REQUIRE(ready);
  CHECK(ready->status == 503);
  CHECK(ready->body.find("bug") != std::string::npos);

  health.setLivenessCheck(nullptr);
  CHECK(client.Get("/healthz")->status == 200);
}

TEST_CASE("HealthServer with an empty address is disabled", "[health_server]") {
  MetricsRegistry metrics;
  auto created = HealthServer::create("", metrics);
  REQUIRE(created);
  CHECK_FALSE((*created)->enabled());
  CHECK((*created)->start());
  CHECK((*created)->port() == 0);
  (*created)->stop();
}

TEST_CASE("HealthServer reports a bad address or a port in use", "[health_server]") {
  MetricsRegistry metrics;
  CHECK_FALSE(HealthServer::create("no-port", metrics));
  auto first = HealthServer::create("127.0.0.1:0", metrics);
  REQUIRE(first);
  REQUIRE((*first)->start());
  auto second = HealthServer::create("127.0.0.1:" + std::to_string((*first)->port()), metrics);
  REQUIRE(second);
  auto started = (*second)->start();
  REQUIRE_FALSE(started);
  CHECK(started.error().message.find("health server") != std::string::npos);
  CHECK(started.error().message.find("in use") != std::string::npos);
}

}  // namespace gvirtus
