#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/http/message.h"
#include "webhook/admission/review.h"
#include "webhook/placement/assigner.h"
#include "webhook/placement/chooser.h"
#include "webhook/placement/source.h"
#include "webhook/pods/pod_wiring.h"

namespace gvirtus::webhook {

class WebhookMetrics;

struct MutateConfig {
  WiringOptions wiring;
  std::vector<std::string> plugins;  // empty: defaultPlugins()
  // Larger bodies are answered 400.
  size_t maxRequestBytes = 3 * 1024 * 1024;
  // Bodies from this size on, or with this many JSON values, are large: at most
  // `largeReviewsAtOnce` of them are parsed and reviewed at once (the others wait up to
  // `largeReviewWait`, then get 503), and the memory one took is handed back to the system
  // after it. A parsed body takes several times its size, and tens of bytes a value
  // however short its text, so this bounds the webhook's memory under a burst of crafted
  // reviews whatever its worker count; real pods are far smaller (a few hundred values).
  size_t largeReviewBytes = 256 * 1024;
  size_t largeReviewValues = 10'000;
  int largeReviewsAtOnce = 2;
  std::chrono::milliseconds largeReviewWait{3000};
  // Non-empty (--dra-claim-template): GVirtuS pods get a claim from the ResourceClaimTemplate
  // of this name in their namespace (webhook/admission/claim_wiring.h), and no backend of the
  // webhook.
  std::string claimTemplate = {};
  // Non-empty (--dra-extended-resource): the extended resource that the DeviceClass
  // gpu.gvirtus.io names. A pod without the label gvirtus.io/enabled that asks for it gets
  // the label gvirtus.io/dra (webhook/admission/claim_wiring.h); kube-scheduler makes its claim.
  std::string extendedResource = {};
};

// The outcome of one review, as metrics count it.
enum class ReviewResult { Unchanged, Patched, Waiting, Denied, Invalid, Error };
std::string_view reviewResultName(ReviewResult result);

// POST /mutate: the one admission endpoint of every webhook entry (GVirtuS pods, pods with a
// gpu-scheduling-map, and with overlays/dra pods asking for the extended resource). Only pod
// CREATE is mutated; any other kind, operation or pod is allowed unchanged. A dry run gets the same
// patch and records nothing. Never throws.
class MutateHandler {
 public:
  // `metrics` may be null.
  MutateHandler(MutateConfig config, const BackendSource& backends, BackendChooser& chooser,
                WebhookMetrics* metrics = nullptr);

  // The answer to one parsed review.
  AdmissionResponse review(const AdmissionRequest& request, ReviewResult* result = nullptr);

  // The HTTP exchange: 200 with an AdmissionReview, or 400 with a one-line message for a
  // body that is not JSON, not an AdmissionReview v1, too large or with too many values;
  // 503 when too many large reviews wait at once.
  HttpResponse handle(std::string_view body);
  HttpResponse handle(const HttpRequest& request) { return handle(request.body); }

 private:
  AdmissionResponse reviewPod(const AdmissionRequest& request, ReviewResult& result);
  // reviewPod in named steps. Each works on `doc`, the copy of the pod that the patch is
  // derived from, adds its warnings, and ends in one Verdict (mutate_handler.cpp): go on,
  // patch, wait, refuse or fail.
  struct Verdict;
  // The scheduling map, then the one path of the pod: the extended resource, the claim, or
  // the label's backend.
  Verdict decide(const AdmissionRequest& request, bool labelled, bool asksExtended,
                 nlohmann::json& doc, std::vector<std::string>& warnings);
  Verdict applySchedulingMap(const AdmissionRequest& request, const std::string& mapText,
                             nlohmann::json& doc, std::vector<std::string>& warnings) const;
  Verdict wireExtendedPath(nlohmann::json& doc, bool labelled) const;
  Verdict wireClaimPath(const nlohmann::json& pod, nlohmann::json& doc,
                        std::vector<std::string>& warnings) const;
  Verdict wireLabelPath(const AdmissionRequest& request, nlohmann::json& doc,
                        std::vector<std::string>& warnings);
  // The one answer to the verdict: the patch from the pod to `doc` with the warnings, or
  // the refusal; logged, and counted in `result`.
  static AdmissionResponse answer(const AdmissionRequest& request, nlohmann::json doc,
                                  std::vector<std::string> warnings, const Verdict& verdict,
                                  ReviewResult& result);
  // A slot for one large review, waiting up to largeReviewWait; false: none freed.
  bool enterLargeReview();
  void leaveLargeReview();

  MutateConfig config_;
  const BackendSource& backends_;
  BackendAssigner assigner_;
  WebhookMetrics* metrics_;
  // Large reviews in progress. (Not std::counting_semaphore: GCC 12's try_acquire_for
  // can sleep past its timeout.)
  std::mutex largeMutex_;
  std::condition_variable largeFreed_;
  int largeInProgress_ = 0;
};

}  // namespace gvirtus::webhook
