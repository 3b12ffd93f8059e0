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

AdmissionResponse MutateHandler::reviewPod(const AdmissionRequest& request, ReviewResult& result) {
  result = ReviewResult::Unchanged;
  if (!request.isPod() || !request.subResource.empty() || request.operation != "CREATE" ||
      !request.object.is_object()) {
    return AdmissionResponse::allow(request.uid);
  }
  const json& pod = request.object;
  const json* enabled = metadataEntry(pod, "labels", kEnabledLabel);
  const bool gvirtus = enabled != nullptr && *enabled == "true";
  const json* mapText = metadataEntry(pod, "annotations", kSchedulingMapAnnotation);
  // The extended-resource path: kube-scheduler makes and allocates the pod's claim.
  const bool asksExtended =
      !config_.extendedResource.empty() && asksForResource(pod, config_.extendedResource);
  if (!gvirtus && mapText == nullptr && !asksExtended) {
    return AdmissionResponse::allow(request.uid);
  }

  // The functions below mutate `doc`, a copy of the pod; the patch is derived at the end.
  AdmissionResponse response = AdmissionResponse::allow(request.uid);
  json doc = pod;
  auto patched = [&](ReviewResult outcome) {
    response.patch = JsonPatch::between(pod, std::move(doc));
    result = outcome == ReviewResult::Patched && response.patch.empty() ? ReviewResult::Unchanged
                                                                        : outcome;
    return std::move(response);  // each path returns once: no copy of the patch
  };
  auto deny = [&](int code, const std::string& message) {
    result = ReviewResult::Denied;
    log::info("pod denied", {{"namespace", request.ns},
                             {"name", request.name},
                             {"uid", request.uid},
                             {"reason", message}});
    return AdmissionResponse::deny(request.uid, code, message);
  };
  auto internal = [&](const Error& error) {
    result = ReviewResult::Error;
    log::error("cannot wire the pod", {{"uid", request.uid}, {"error", error.message}});
    return AdmissionResponse::deny(request.uid, 500,
                                   "gvirtus-webhook cannot wire the pod: " + error.message);
  };

  if (mapText != nullptr) {
    auto map = parseSchedulingMap(mapText->get_ref<const std::string&>());
    if (!map) {
      return deny(400, map.error().message);
    }
    auto index = podIndex(doc, request.name);
    if (!index) {
      response.warnings.push_back(std::string(kSchedulingMapAnnotation) +
                                  ": the pod has no index (no " + std::string(kPodIndexLabel) +
                                  " label, no -N name suffix); placed freely");
    } else if (auto entry = map->find(*index); entry == map->end()) {
      response.warnings.push_back(std::string(kSchedulingMapAnnotation) + " has no entry for pod " +
                                  std::to_string(*index) + "; placed freely");
    } else {
      applySchedulingEntry(doc, entry->second);
    }
  }

  // On every path: a backend's session check admits its peers by address, and a
  // host-network pod's address is its node's, shared by every process there.
  if ((gvirtus || asksExtended) && usesHostNetwork(doc)) {
    return deny(400,
                "a GVirtuS pod cannot use the host network (spec.hostNetwork): its "
                "backend admits sessions by the pod's own address");
  }
  if (asksExtended) {
    if (gvirtus) {
      return deny(400, "a GVirtuS pod gets its remote GPU one way: the label " +
                           std::string(kEnabledLabel) + " or the resource " +
                           config_.extendedResource + ", not both");
    }
    if (auto wired = wireExtendedResource(doc, config_.extendedResource); !wired) {
      return deny(400, wired.error().message);
    }
    return patched(ReviewResult::Patched);
  }
  if (gvirtus && !config_.claimTemplate.empty()) {
    // The claim path: kube-scheduler allocates the backend GPU (docs/dra.md).
    if (auto wired = wireClaim(doc, config_.claimTemplate); !wired) {
      return deny(400, wired.error().message);
    }
    // Read from the pod as created: the wiring removes some of them.
    if (auto ignored = ignoredOnClaimPath(pod); !ignored.empty()) {
      std::string keys;
      for (const auto& key : ignored) {
        keys += (keys.empty() ? "" : ", ") + key;
      }
      response.warnings.push_back("GVirtuS pods get their GPU from ResourceClaimTemplate " +
                                  config_.claimTemplate + " here; ignored: " + keys);
    }
    return patched(ReviewResult::Patched);
  }
  if (gvirtus) {
    auto requirements = requirementsFromPod(doc);
    if (!requirements) {
      return deny(400, requirements.error().message);
    }
    // The object of a CREATE may leave its namespace to the request.
    requirements->pod = request.name.empty() ? "" : request.ns + "/" + request.name;
    if (auto wired = wirePod(doc, config_.wiring); !wired) {
      return deny(400, wired.error().message);
    }

    // A member of a KAI PodGroup waits whatever the backends, unless its author pinned one:
    // its gang is released whole by the waiting-pod controller, which sees all its members
    // (admission sees one).
    const json* pinned = metadataEntry(doc, "annotations", kBackendAnnotation);
    const json* podGroup = metadataEntry(doc, "annotations", kPodGroupAnnotation);
    if (pinned == nullptr && podGroup != nullptr) {
      const std::string group = podGroup->get<std::string>().substr(0, 253);
      markWaiting(doc);
      response.warnings.push_back("a member of KAI PodGroup " + group +
                                  ": it waits until its whole gang can have GVirtuS backends");
      return patched(ReviewResult::Waiting);
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
          return deny(403, why.reason);
        case NotAssigned::Kind::Error:
          return internal(Error{.message = why.reason, .httpStatus = 0, .reason = {}});
        case NotAssigned::Kind::Waits:
          markWaiting(doc);
          response.warnings.push_back("no GVirtuS backend can take this pod yet (" + why.reason +
                                      "); it waits for one");
          log::info("pod waits for a backend", {{"namespace", request.ns},
                                                {"name", request.name},
                                                {"uid", request.uid},
                                                {"reason", why.reason}});
          return patched(ReviewResult::Waiting);
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
  }
  return patched(ReviewResult::Patched);
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
