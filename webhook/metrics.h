#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "common/metrics.h"

namespace gvirtus::webhook {

// The webhook's own metrics, registered once in the process registry:
//   gvirtus_webhook_reviews_total{result}             reviews by outcome
//   gvirtus_webhook_review_duration_seconds           handler latency (histogram)
//   gvirtus_webhook_backend_choices_total{backend}    pods given each backend (IP:PORT)
//   gvirtus_webhook_backends_available                backends the source offers now
class WebhookMetrics {
 public:
  // `backendsAvailable` is read at each scrape (empty: the gauge is not registered).
  explicit WebhookMetrics(MetricsRegistry& registry,
                          std::function<double()> backendsAvailable = {});

  void review(std::string_view result, std::chrono::nanoseconds latency);
  void backendChosen(const std::string& endpoint);

 private:
  CounterFamily& reviews_;
  Histogram& latency_;
  CounterFamily& choices_;
};

}  // namespace gvirtus::webhook
