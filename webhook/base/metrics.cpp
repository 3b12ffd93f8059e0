#include "webhook/base/metrics.h"

namespace gvirtus::webhook {

WebhookMetrics::WebhookMetrics(MetricsRegistry& registry, std::function<double()> backendsAvailable,
                               std::function<double()> certificateExpiry)
    : reviews_(registry.counterFamily("gvirtus_webhook_reviews_total",
                                      "AdmissionReviews answered, by result: unchanged, patched, "
                                      "waiting, denied, invalid (HTTP 400), error",
                                      {"result"})),
      // 50 us to ~0.8 s: the handler alone is well under a millisecond.
      latency_(registry.histogram("gvirtus_webhook_review_duration_seconds",
                                  "Time to answer one AdmissionReview, body to body",
                                  exponentialBuckets(0.00005, 2, 15))),
      choices_(registry.counterFamily("gvirtus_webhook_backend_choices_total",
                                      "Pods given a backend, by backend IP:PORT", {"backend"})),
      waiting_(registry.gauge("gvirtus_webhook_waiting_pods",
                              "GVirtuS pods waiting behind the scheduling gate for a backend, as "
                              "the waiting-pod controller sees them (0 where it does not run)")),
      oldestWaiting_(registry.gauge(
          "gvirtus_webhook_oldest_waiting_pod_age_seconds",
          "Age of the oldest GVirtuS pod waiting behind the scheduling gate, as the waiting-pod "
          "controller saw it at its last pass (at least every 10s); 0 when none waits or where "
          "the controller does not run")),
      releases_(registry.counter("gvirtus_webhook_releases_total",
                                 "Waiting pods given a backend and released (gate removed)")),
      passes_(registry.counter(
          "gvirtus_webhook_release_passes_total",
          "Looks of the waiting-pod controller: syncs of one release unit (a waiting pod or a "
          "gang, on its change or when a backend change puts it back) and resyncs of the "
          "parked units (at least every 10s); flat on the leader means stuck")),
      // 5 ms to ~80 s.
      releaseLatency_(registry.histogram(
          "gvirtus_webhook_release_latency_seconds",
          "Time from a backend becoming able to take a waiting pod (turning Ready, or its load "
          "report changing; the pod's creation when later) to the pod's release",
          exponentialBuckets(0.005, 2, 15))),
      wantedBackends_(registry.gauge(
          "gvirtus_webhook_autoscale_wanted_backends",
          "Backends the ready ones and the pods waiting past --scale-up-after need, whatever "
          "--autoscale-max and the candidates allow: a target for an external autoscaler "
          "(0 where the autoscaler does not run)")),
      autoscaledBackends_(registry.gauge(
          "gvirtus_webhook_autoscale_backends",
          "Candidate nodes opted in by the autoscaler (annotation gvirtus.io/autoscaled)")),
      duePods_(registry.gauge("gvirtus_webhook_autoscale_due_pods",
                              "GVirtuS pods that waited for a backend longer than "
                              "--scale-up-after for lack of capacity")),
      scaleEvents_(registry.counterFamily(
          "gvirtus_webhook_autoscale_events_total",
          "Candidate nodes opted in (direction=up) and out (direction=down) by the autoscaler",
          {"direction"})),
      peerPublications_(registry.counter(
          "gvirtus_webhook_peer_publications_total",
          "Backend pods' gvirtus.io/peers written by the peer publisher (leader): the addresses "
          "of the pods assigned to each, which its backend lets connect")),
      peerFailures_(registry.counter(
          "gvirtus_webhook_peer_publication_failures_total",
          "Writes of a backend pod's gvirtus.io/peers that failed (retried with backoff); while "
          "one fails, new pods of that backend are refused by it")),
      backendLost_(registry.counterFamily(
          "gvirtus_webhook_backend_lost_pods_total",
          "GVirtuS pods whose backend went away (gone, new address, not ready past "
          "--backend-lost-grace), by what the leader did: recreated (deleted for its owner to "
          "replace), marked (a bare pod: condition gvirtus.io/BackendLost and an Event), tainted "
          "(a "
          "claimant left to the device taint its backend's devices were given), failed",
          {"action"})) {
  if (backendsAvailable) {
    registry.gaugeFunction("gvirtus_webhook_backends_available",
                           "Backends the backend source offers now (Ready, with an IPv4 address)",
                           std::move(backendsAvailable));
  }
  if (certificateExpiry) {
    registry.gaugeFunction("gvirtus_webhook_certificate_expiry_timestamp_seconds",
                           "notAfter of the serving certificate in use, in seconds since the Unix "
                           "epoch (0 before one is loaded)",
                           std::move(certificateExpiry));
  }
}

void WebhookMetrics::review(std::string_view result, std::chrono::nanoseconds latency) {
  reviews_.withLabels({std::string(result)}).inc();
  latency_.observe(std::chrono::duration<double>(latency).count());
}

void WebhookMetrics::backendChosen(const std::string& endpoint) {
  choices_.withLabels({endpoint}).inc();
}

void WebhookMetrics::releaseLooked() {
  passes_.inc();
}

void WebhookMetrics::waitingPods(double count, std::chrono::seconds oldestAge) {
  waiting_.set(count);
  oldestWaiting_.set(static_cast<double>(oldestAge.count()));
}

void WebhookMetrics::released(std::optional<std::chrono::nanoseconds> sinceBackendReady) {
  releases_.inc();
  if (sinceBackendReady) {
    releaseLatency_.observe(std::chrono::duration<double>(*sinceBackendReady).count());
  }
}

void WebhookMetrics::autoscaled(double wanted, double autoscaled, double due, int64_t optedIn,
                                int64_t optedOut) {
  wantedBackends_.set(wanted);
  autoscaledBackends_.set(autoscaled);
  duePods_.set(due);
  if (optedIn > 0) {
    scaleEvents_.withLabels({"up"}).inc(static_cast<double>(optedIn));
  }
  if (optedOut > 0) {
    scaleEvents_.withLabels({"down"}).inc(static_cast<double>(optedOut));
  }
}

void WebhookMetrics::peersPublished() {
  peerPublications_.inc();
}

void WebhookMetrics::backendLost(std::string_view action) {
  backendLost_.withLabels({std::string(action)}).inc();
}

void WebhookMetrics::peersFailed() {
  peerFailures_.inc();
}

}  // namespace gvirtus::webhook
