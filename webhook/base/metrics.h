#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/telemetry/metrics.h"

namespace gvirtus::webhook {

// The webhook's own metrics, registered once in the process registry:
//   gvirtus_webhook_reviews_total{result}             reviews by outcome
//   gvirtus_webhook_review_duration_seconds           handler latency (histogram)
//   gvirtus_webhook_backend_choices_total{backend}    pods given each backend (IP:PORT)
//   gvirtus_webhook_backends_available                backends the source offers now
//   gvirtus_webhook_waiting_pods                      pods waiting behind the gate (leader)
//   gvirtus_webhook_releases_total                    waiting pods released to a backend
//   gvirtus_webhook_release_passes_total              looks of the waiting-pod controller (leader)
//   gvirtus_webhook_release_latency_seconds           backend ready to pod released (histogram)
//   gvirtus_webhook_oldest_waiting_pod_age_seconds    age of the oldest waiting pod (leader)
//   gvirtus_webhook_certificate_expiry_timestamp_seconds  notAfter of the serving certificate
//   gvirtus_webhook_autoscale_wanted_backends       backends the waiting pods need (leader)
//   gvirtus_webhook_autoscale_backends              nodes opted in by the autoscaler (leader)
//   gvirtus_webhook_autoscale_due_pods              pods waiting past --scale-up-after (leader)
//   gvirtus_webhook_autoscale_events_total{direction}  nodes opted in (up) and out (down)
//   gvirtus_webhook_peer_publications_total         gvirtus.io/peers written on backend pods
//   gvirtus_webhook_peer_publication_failures_total   writes of gvirtus.io/peers that failed
//   gvirtus_webhook_backend_lost_pods_total{action}  pods whose backend went away, by action
//                                                    (recreated, marked, failed)
class WebhookMetrics {
 public:
  // `backendsAvailable` and `certificateExpiry` (the serving certificate's notAfter, Unix
  // seconds) are read at each scrape (empty: that gauge is not registered).
  explicit WebhookMetrics(MetricsRegistry& registry, std::function<double()> backendsAvailable = {},
                          std::function<double()> certificateExpiry = {});

  void review(std::string_view result, std::chrono::nanoseconds latency);
  void backendChosen(const std::string& endpoint);
  // The waiting-pod controller: the pods it sees waiting, and one release, with the time
  // since the backend could take the pod when known.
  // `oldestAge`: the age of the oldest of them (0 when none waits).
  void waitingPods(double count, std::chrono::seconds oldestAge = std::chrono::seconds(0));
  void released(std::optional<std::chrono::nanoseconds> sinceBackendReady);
  // A look of the waiting-pod controller (one unit's sync, or a resync) has ended: what it
  // released is released, what it tells is told.
  void releaseLooked();
  // The backend autoscaler after one step: its gauges, and the nodes it opted in and out.
  void autoscaled(double wanted, double autoscaled, double due, int64_t optedIn, int64_t optedOut);
  // The peer publisher wrote a backend pod's gvirtus.io/peers, or failed to.
  void peersPublished();
  void peersFailed();
  // The backend follower acted on a pod whose backend went away: "recreated" (deleted for
  // its owner to replace), "marked" (a bare pod: condition and Event), "failed".
  void backendLost(std::string_view action);

 private:
  CounterFamily& reviews_;
  Histogram& latency_;
  CounterFamily& choices_;
  Gauge& waiting_;
  Gauge& oldestWaiting_;
  Counter& releases_;
  Counter& passes_;
  Histogram& releaseLatency_;
  Gauge& wantedBackends_;
  Gauge& autoscaledBackends_;
  Gauge& duePods_;
  CounterFamily& scaleEvents_;
  Counter& peerPublications_;
  Counter& peerFailures_;
  CounterFamily& backendLost_;
};

}  // namespace gvirtus::webhook
