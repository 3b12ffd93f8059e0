#include "webhook/base/metrics.h"

#include <catch2/catch.hpp>

#include "support/cluster_env.h"

namespace {

using gvirtus::testing::metricValue;
using gvirtus::webhook::WebhookMetrics;

TEST_CASE("the waiting-pod gauges give the count and the oldest pod's age", "[metrics]") {
  gvirtus::MetricsRegistry registry;
  WebhookMetrics metrics(registry);
  metrics.waitingPods(3, std::chrono::seconds(754));
  CHECK(metricValue(registry.render(), "gvirtus_webhook_waiting_pods") == 3);
  CHECK(metricValue(registry.render(), "gvirtus_webhook_oldest_waiting_pod_age_seconds") == 754);
  metrics.waitingPods(0);
  CHECK(metricValue(registry.render(), "gvirtus_webhook_oldest_waiting_pod_age_seconds") == 0);
}

TEST_CASE("the certificate expiry gauge is read at each scrape", "[metrics]") {
  gvirtus::MetricsRegistry registry;
  double expiry = 0;
  WebhookMetrics metrics(registry, {}, [&expiry] { return expiry; });
  CHECK(metricValue(registry.render(), "gvirtus_webhook_certificate_expiry_timestamp_seconds") ==
        0);
  expiry = 1.8e9;
  CHECK(metricValue(registry.render(), "gvirtus_webhook_certificate_expiry_timestamp_seconds") ==
        1.8e9);
  // Without the function the gauge is not there at all.
  gvirtus::MetricsRegistry bare;
  WebhookMetrics none(bare);
  CHECK(bare.render().find("certificate_expiry") == std::string::npos);
}

}  // namespace
