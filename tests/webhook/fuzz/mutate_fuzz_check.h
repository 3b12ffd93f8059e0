#pragma once

// The property the fuzz target checks for any body POSTed to /mutate, shared with the
// replay unit test (which runs the seed corpus and random mutations of it under GCC):
//   - the handler answers (never throws, never crashes): 400 exactly for bodies that are
//     not an AdmissionReview v1, else 200 with an AdmissionReview;
//   - the answer echoes the request's uid;
//   - the patch decodes, applies to the object, and applied a second time to its own
//     result changes nothing more;
//   - the webhook reinvoked on the patched object answers with no patch.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/base/base64.h"
#include "common/base/json_patch.h"
#include "webhook/admission/mutate_handler.h"
#include "webhook/admission/review.h"
#include "webhook/placement/chooser.h"

namespace gvirtus::webhook::fuzz {

class FixedBackends : public BackendSource {
 public:
  FixedBackends() {
    for (const char* ip : {"10.0.0.1", "10.0.0.2"}) {
      Backend b;
      b.ip = ip;
      b.port = 9999;
      b.podNamespace = "gvirtus-system";
      b.podName = std::string("backend-") + ip;
      b.zone = "zone-a";
      BackendLoad load;
      load.connections = 1;
      load.maxSessions = 1000000;
      load.gpus = {GpuLoad{0, 81920, 1024, 10, {}, {}}};
      load.updated = std::chrono::system_clock::now() + std::chrono::hours(24 * 365 * 100);
      b.load = load;
      backends_.push_back(b);
    }
  }
  void setOnChange(std::function<void()>) override {}
  void start() override {}
  void stop() override {}
  bool ready() const override { return true; }
  BackendSnapshot backends() const override {
    return std::make_shared<const std::vector<Backend>>(backends_);
  }

 private:
  std::vector<Backend> backends_;
};

struct FuzzHarness {
  FixedBackends source;
  BackendChooser chooser;
  MutateHandler handler{MutateConfig{{true, "kai-scheduler", "default-queue"}, {}, 1 << 20}, source,
                        chooser};
};

// "" when every property holds, else what broke.
inline std::string checkOneInput(FuzzHarness& h, std::string_view body) {
  using nlohmann::json;
  const HttpResponse response = h.handler.handle(body);
  auto request = body.size() <= (1u << 20) ? parseAdmissionReview(body)
                                           : Result<AdmissionRequest>(fail("too large"));
  if (!request) {
    return response.status == 400 ? ""
                                  : "a bad body was answered " + std::to_string(response.status);
  }
  if (response.status != 200) {
    return "a valid review was answered " + std::to_string(response.status) + ": " + response.body;
  }
  const json answer = json::parse(response.body, nullptr, false);
  if (answer.is_discarded() || !answer.is_object() || !answer.contains("response")) {
    return "the answer is not an AdmissionReview: " + response.body;
  }
  const json& r = answer["response"];
  if (r.value("uid", "") != request->uid) {
    return "the answer's uid differs from the request's";
  }
  if (!r.contains("patch")) {
    return "";
  }
  if (r.value("patchType", "") != "JSONPatch" || !r["patch"].is_string()) {
    return "a patch without patchType JSONPatch";
  }
  auto decoded = base64Decode(r["patch"].get<std::string>());
  if (!decoded) {
    return "the patch is not base64";
  }
  const json patch = json::parse(*decoded, nullptr, false);
  if (patch.is_discarded()) {
    return "the patch is not JSON";
  }
  auto once = applyJsonPatch(request->object, patch);
  if (!once) {
    return "the patch does not apply: " + once.error().message;
  }
  auto twice = applyJsonPatch(*once, patch);
  if (!twice) {
    return "the patch does not apply a second time: " + twice.error().message;
  }
  if (*twice != *once) {
    return "the patch applied twice changes more: " + patch.dump();
  }
  AdmissionRequest again = *request;
  again.object = *once;
  const AdmissionResponse reinvoked = h.handler.review(again);
  if (!reinvoked.patch.empty()) {
    return "the reinvoked webhook patches again: " + reinvoked.patch.dump() +
           " after: " + patch.dump();
  }
  return "";
}

}  // namespace gvirtus::webhook::fuzz
