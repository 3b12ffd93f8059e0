#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/http_server.h"
#include "webhook/admission_review.h"
#include "webhook/backend_chooser.h"
#include "webhook/backend_source.h"
#include "webhook/pod_patch.h"

namespace gvirtus::webhook {

class WebhookMetrics;

struct MutateConfig {
  WiringOptions wiring;
  std::vector<std::string> plugins;  // empty: defaultPlugins()
  // Larger bodies are answered 400.
  size_t maxRequestBytes = 3 * 1024 * 1024;
};

// The outcome of one review, as metrics count it.
enum class ReviewResult { Unchanged, Patched, Waiting, Denied, Invalid, Error };
std::string_view reviewResultName(ReviewResult result);

// POST /mutate: the one admission endpoint of both webhook entries (GVirtuS pods, and pods
// with a gpu-scheduling-map). Only pod CREATE is mutated; any other kind, operation or
// unlabelled pod is allowed unchanged. A dry run gets the same patch and records nothing.
// Never throws.
class MutateHandler {
 public:
  // `metrics` may be null.
  MutateHandler(MutateConfig config, const BackendSource& backends, BackendChooser& chooser,
                WebhookMetrics* metrics = nullptr);

  // The answer to one parsed review.
  AdmissionResponse review(const AdmissionRequest& request, ReviewResult* result = nullptr);

  // The HTTP exchange: 200 with an AdmissionReview, or 400 with a one-line message for a
  // body that is not JSON, not an AdmissionReview v1, or too large.
  HttpResponse handle(std::string_view body);
  HttpResponse handle(const HttpRequest& request) { return handle(request.body); }

 private:
  AdmissionResponse reviewPod(const AdmissionRequest& request, ReviewResult& result);

  MutateConfig config_;
  const BackendSource& backends_;
  BackendChooser& chooser_;
  WebhookMetrics* metrics_;
};

}  // namespace gvirtus::webhook
