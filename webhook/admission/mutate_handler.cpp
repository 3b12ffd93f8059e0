#include "webhook/admission/mutate_handler.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <exception>

#include "common/base/json_access.h"
#include "common/contract/pod_origin.h"
#include "common/telemetry/log.h"
#include "webhook/admission/claim_wiring.h"
#include "webhook/admission/scheduling_map.h"
#include "webhook/base/metrics.h"
#include "webhook/base/names.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

const json* metadataEntry(const json& pod, std::string_view section, std::string_view key) {
  const json* metadata = member(pod, "metadata");
  const json* map = metadata != nullptr ? member(*metadata, section) : nullptr;
  const json* value = map != nullptr ? member(*map, key) : nullptr;
  return value != nullptr && value->is_string() ? value : nullptr;
}

HttpResponse textResponse(int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.body = std::move(body) + "\n";
  return response;
}

}  // namespace

std::string_view reviewResultName(ReviewResult result) {
  switch (result) {
    case ReviewResult::Unchanged:
      return "unchanged";
    case ReviewResult::Patched:
      return "patched";
    case ReviewResult::Waiting:
      return "waiting";
    case ReviewResult::Denied:
      return "denied";
    case ReviewResult::Invalid:
      return "invalid";
    case ReviewResult::Error:
      return "error";
  }
  return "error";
}

MutateHandler::MutateHandler(MutateConfig config, const BackendSource& backends,
                             BackendChooser& chooser, WebhookMetrics* metrics)
    : config_(std::move(config)),
      backends_(backends),
      assigner_(chooser, config_.plugins),
      metrics_(metrics) {}

AdmissionResponse MutateHandler::review(const AdmissionRequest& request, ReviewResult* result) {
  ReviewResult outcome = ReviewResult::Unchanged;
  AdmissionResponse response;
  try {
    response = reviewPod(request, outcome);
  } catch (const std::exception& e) {
    // Cannot happen by design; a review must never take the process down.
    log::error("review failed", {{"uid", request.uid}, {"error", e.what()}});
    outcome = ReviewResult::Error;
    response = AdmissionResponse::deny(request.uid, 500,
                                       std::string("gvirtus-webhook internal error: ") + e.what());
  }
  if (result != nullptr) {
    *result = outcome;
  }
  return response;
}

struct MutateHandler::Verdict {
  enum class Kind { Next, Patch, Wait, Refuse, Fail };
  Kind kind = Kind::Next;
  int code = 0;         // Refuse: the refusal's HTTP status
  std::string message;  // Refuse, Fail: why

  static Verdict next() { return {}; }
  static Verdict patch() { return {.kind = Kind::Patch, .code = 0, .message = {}}; }
  static Verdict wait() { return {.kind = Kind::Wait, .code = 0, .message = {}}; }
  static Verdict refuse(int code, std::string message) {
    return {.kind = Kind::Refuse, .code = code, .message = std::move(message)};
  }
  static Verdict fail(std::string message) {
    return {.kind = Kind::Fail, .code = 500, .message = std::move(message)};
  }
};

AdmissionResponse MutateHandler::reviewPod(const AdmissionRequest& request, ReviewResult& result) {
  result = ReviewResult::Unchanged;
  if (!request.isPod() || !request.subResource.empty() || request.operation != "CREATE" ||
      !request.object.is_object()) {
    return AdmissionResponse::allow(request.uid);
  }
  const json& pod = request.object;
  const json* enabled = metadataEntry(pod, "labels", kEnabledLabel);
  const bool labelled = enabled != nullptr && *enabled == "true";
  // The extended-resource path: kube-scheduler makes and allocates the pod's claim.
  const bool asksExtended =
      !config_.extendedResource.empty() && asksForResource(pod, config_.extendedResource);
  if (!labelled && !asksExtended &&
      metadataEntry(pod, "annotations", kSchedulingMapAnnotation) == nullptr) {
    return AdmissionResponse::allow(request.uid);
  }
  json doc = pod;
  std::vector<std::string> warnings;
  const Verdict verdict = decide(request, labelled, asksExtended, doc, warnings);
  return answer(request, std::move(doc), std::move(warnings), verdict, result);
}

MutateHandler::Verdict MutateHandler::decide(const AdmissionRequest& request, bool labelled,
                                             bool asksExtended, json& doc,
                                             std::vector<std::string>& warnings) {
  if (const json* mapText = metadataEntry(doc, "annotations", kSchedulingMapAnnotation)) {
    Verdict mapped =
        applySchedulingMap(request, mapText->get_ref<const std::string&>(), doc, warnings);
    if (mapped.kind != Verdict::Kind::Next) {
      return mapped;
    }
  }
  // On every path: a backend's session check admits its peers by address, and a
  // host-network pod's address is its node's, shared by every process there.
  if ((labelled || asksExtended) && usesHostNetwork(doc)) {
    return Verdict::refuse(400,
                           "a GVirtuS pod cannot use the host network (spec.hostNetwork): its "
                           "backend admits sessions by the pod's own address");
  }
  if (asksExtended) {
    return wireExtendedPath(doc, labelled);
  }
  if (labelled && !config_.claimTemplate.empty()) {
    return wireClaimPath(request.object, doc, warnings);
  }
  if (labelled) {
    return wireLabelPath(request, doc, warnings);
  }
  return Verdict::patch();
}

MutateHandler::Verdict MutateHandler::applySchedulingMap(const AdmissionRequest& request,
                                                         const std::string& mapText, json& doc,
                                                         std::vector<std::string>& warnings) const {
  auto map = parseSchedulingMap(mapText);
  if (!map) {
    return Verdict::refuse(400, map.error().message);
  }
  auto index = podIndex(doc, request.name);
  if (!index) {
    warnings.push_back(std::string(kSchedulingMapAnnotation) + ": the pod has no index (no " +
                       std::string(kPodIndexLabel) + " label, no -N name suffix); placed freely");
  } else if (auto entry = map->find(*index); entry == map->end()) {
    warnings.push_back(std::string(kSchedulingMapAnnotation) + " has no entry for pod " +
                       std::to_string(*index) + "; placed freely");
  } else {
    applySchedulingEntry(doc, entry->second);
  }
  return Verdict::next();
}

MutateHandler::Verdict MutateHandler::wireExtendedPath(json& doc, bool labelled) const {
  if (labelled) {
    return Verdict::refuse(400, "a GVirtuS pod gets its remote GPU one way: the label " +
                                    std::string(kEnabledLabel) + " or the resource " +
                                    config_.extendedResource + ", not both");
  }
  if (auto wired = wireExtendedResource(doc, config_.extendedResource); !wired) {
    return Verdict::refuse(400, wired.error().message);
  }
  return Verdict::patch();
}

MutateHandler::Verdict MutateHandler::wireClaimPath(const json& pod, json& doc,
                                                    std::vector<std::string>& warnings) const {
  // The claim path: kube-scheduler allocates the backend GPU (docs/dra.md).
  if (auto wired = wireClaim(doc, config_.claimTemplate); !wired) {
    return Verdict::refuse(400, wired.error().message);
  }
  // Read from the pod as created: the wiring removes some of them.
  if (auto ignored = ignoredOnClaimPath(pod); !ignored.empty()) {
    std::string keys;
    for (const auto& key : ignored) {
      keys += (keys.empty() ? "" : ", ") + key;
    }
    warnings.push_back("GVirtuS pods get their GPU from ResourceClaimTemplate " +
                       config_.claimTemplate + " here; ignored: " + keys);
  }
  return Verdict::patch();
}

MutateHandler::Verdict MutateHandler::wireLabelPath(const AdmissionRequest& request, json& doc,
                                                    std::vector<std::string>& warnings) {
  auto requirements = requirementsFromPod(doc);
  if (!requirements) {
    return Verdict::refuse(400, requirements.error().message);
  }
  // The object of a CREATE may leave its namespace to the request.
  requirements->pod = request.name.empty() ? "" : request.ns + "/" + request.name;
  if (auto wired = wirePod(doc, config_.wiring); !wired) {
    return Verdict::refuse(400, wired.error().message);
  }
  // A member of a KAI PodGroup waits whatever the backends, unless its author pinned one:
  // its gang is released whole by the waiting-pod controller, which sees all its members
  // (admission sees one).
  const json* pinned = metadataEntry(doc, "annotations", kBackendAnnotation);
  const json* podGroup = metadataEntry(doc, "annotations", kPodGroupAnnotation);
  if (pinned == nullptr && podGroup != nullptr) {
    const std::string group = podGroup->get<std::string>().substr(0, 253);
    markWaiting(doc);
    warnings.push_back("a member of KAI PodGroup " + group +
                       ": it waits until its whole gang can have GVirtuS backends");
    return Verdict::wait();
  }
  // Held by name: the backends must outlive the decision.
  const BackendSnapshot backends = backends_.backends();
  auto assigned = assigner_.assign(
      *backends, *requirements,
      {.pinned = pinned != nullptr ? std::optional(pinned->get<std::string>()) : std::nullopt,
       .record = !request.dryRun});
  if (!assigned) {
    const NotAssigned& why = assigned.error();
    switch (why.kind) {
      case NotAssigned::Kind::Denied:
        return Verdict::refuse(403, why.reason);
      case NotAssigned::Kind::Error:
        return Verdict::fail(why.reason);
      case NotAssigned::Kind::Waits:
        markWaiting(doc);
        warnings.push_back("no GVirtuS backend can take this pod yet (" + why.reason +
                           "); it waits for one");
        log::info("pod waits for a backend", {{"namespace", request.ns},
                                              {"name", request.name},
                                              {"uid", request.uid},
                                              {"reason", why.reason}});
        return Verdict::wait();
    }
  }
  if (!request.dryRun) {
    if (metrics_ != nullptr) {
      metrics_->backendChosen(assigned->assignment.endpoint);
    }
    // Asked first: the fields are a JSON object, built even when nothing is logged (3% of
    // a review).
    if (log::enabled(log::Level::Debug)) {
      log::debug("backend chosen", {{"namespace", request.ns},
                                    {"name", request.name},
                                    {"uid", request.uid},
                                    {"backend", assigned->assignment.endpoint},
                                    {"backendPod", assigned->assignment.backendPod},
                                    {"policy", policyName(assigned->choice.policy)}});
    }
  }
  assignBackend(doc, assigned->assignment);
  return Verdict::patch();
}

AdmissionResponse MutateHandler::answer(const AdmissionRequest& request, json doc,
                                        std::vector<std::string> warnings, const Verdict& verdict,
                                        ReviewResult& result) {
  switch (verdict.kind) {
    case Verdict::Kind::Refuse:
      result = ReviewResult::Denied;
      log::info("pod denied", {{"namespace", request.ns},
                               {"name", request.name},
                               {"uid", request.uid},
                               {"reason", verdict.message}});
      return AdmissionResponse::deny(request.uid, verdict.code, verdict.message);
    case Verdict::Kind::Fail:
      result = ReviewResult::Error;
      log::error("cannot wire the pod", {{"uid", request.uid}, {"error", verdict.message}});
      return AdmissionResponse::deny(request.uid, 500,
                                     "gvirtus-webhook cannot wire the pod: " + verdict.message);
    case Verdict::Kind::Next:
    case Verdict::Kind::Patch:
    case Verdict::Kind::Wait:
      break;
  }
  AdmissionResponse response = AdmissionResponse::allow(request.uid);
  response.warnings = std::move(warnings);
  response.patch = JsonPatch::between(request.object, std::move(doc));
  if (verdict.kind == Verdict::Kind::Wait) {
    result = ReviewResult::Waiting;
  } else {
    result = response.patch.empty() ? ReviewResult::Unchanged : ReviewResult::Patched;
  }
  return response;
}

bool MutateHandler::enterLargeReview() {
  std::unique_lock lock(largeMutex_);
  const int slots = std::max(config_.largeReviewsAtOnce, 1);
  if (!largeFreed_.wait_for(lock, config_.largeReviewWait,
                            [&] { return largeInProgress_ < slots; })) {
    return false;
  }
  ++largeInProgress_;
  return true;
}

void MutateHandler::leaveLargeReview() {
  {
    std::lock_guard lock(largeMutex_);
    --largeInProgress_;
  }
  largeFreed_.notify_one();
}

HttpResponse MutateHandler::handle(std::string_view body) {
  const auto start = std::chrono::steady_clock::now();
  ReviewResult result = ReviewResult::Invalid;
  HttpResponse response;
  const JsonShape shape = body.size() > config_.maxRequestBytes ? JsonShape{} : shapeOf(body);
  const bool large =
      body.size() >= config_.largeReviewBytes || shape.values >= config_.largeReviewValues;
  if (body.size() > config_.maxRequestBytes) {
    response = textResponse(400, "bad AdmissionReview: the body is larger than " +
                                     std::to_string(config_.maxRequestBytes) + " bytes");
  } else if (large && !enterLargeReview()) {
    response = textResponse(503, "too many large AdmissionReviews at once; retry");
  } else {
    if (auto request = parseAdmissionReview(body, shape); !request) {
      response = textResponse(400, "bad AdmissionReview: " + request.error().message);
    } else {
      response.status = 200;
      response.contentType = "application/json";
      response.body = renderAdmissionReview(review(*request, &result));
    }
    if (large) {
      // The parse freed what it took, but glibc keeps it in its arenas: give it back.
      ::malloc_trim(0);
      leaveLargeReview();
    }
  }
  if (metrics_ != nullptr) {
    metrics_->review(reviewResultName(result), std::chrono::steady_clock::now() - start);
  }
  return response;
}

}  // namespace gvirtus::webhook
