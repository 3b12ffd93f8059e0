#include "webhook/admission/review.h"

#include "common/base/base64.h"
#include "common/base/json_access.h"

#include <algorithm>
#include <cstdint>

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

constexpr std::string_view kApiVersion = "admission.k8s.io/v1";
// Deeper JSON is refused before parsing: nlohmann::json copies and compares recursively,
// and a Kubernetes object is never nested this deep.
constexpr int kMaxDepth = 128;
// More values than this are refused before parsing: a parsed value costs tens of bytes
// however small its text (`[{},{},...]` takes 2 bytes a value and over 60 parsed), so the
// body size alone does not bound the memory a parse takes. A pod rarely has 10,000.
constexpr std::size_t kMaxValues = 100'000;

Result<std::string> optionalString(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    return std::string();
  }
  if (!it->is_string()) {
    return fail(std::string("request.") + key + " is not a string");
  }
  return it->get<std::string>();
}

}  // namespace

JsonShape shapeOf(std::string_view text) {
  JsonShape shape;
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      // Most of a review is strings: jump from quote to quote (memchr), past the quotes
      // escaped by an odd run of backslashes.
      for (size_t end = i;;) {
        end = text.find('"', end + 1);
        if (end == std::string_view::npos) {
          return shape;
        }
        size_t backslashes = 0;
        while (text[end - 1 - backslashes] == '\\') {
          ++backslashes;
        }
        if (backslashes % 2 == 0) {
          i = end;
          break;
        }
      }
    } else if (c == '[' || c == '{') {
      shape.depth = std::max(shape.depth, ++depth);
      ++shape.values;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',') {
      ++shape.values;
    }
  }
  return shape;
}

Result<AdmissionRequest> parseAdmissionReview(std::string_view body, const JsonShape& shape) {
  if (shape.depth > kMaxDepth) {
    return fail("the body nests deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  if (shape.values > kMaxValues) {
    return fail("the body holds more than " + std::to_string(kMaxValues) + " JSON values");
  }
  auto parsed = parseJson(body);
  if (!parsed) {
    return fail(parsed.error().context("the body is not JSON"));
  }
  json& doc = *parsed;
  if (!doc.is_object()) {
    return fail("the body is not a JSON object");
  }
  auto kind = doc.find("kind");
  auto apiVersion = doc.find("apiVersion");
  if (kind == doc.end() || *kind != "AdmissionReview") {
    return fail("the body is not an AdmissionReview (kind is not \"AdmissionReview\")");
  }
  if (apiVersion == doc.end() || *apiVersion != kApiVersion) {
    return fail("the AdmissionReview is not " + std::string(kApiVersion) + " (only v1 is served)");
  }
  auto request = doc.find("request");
  if (request == doc.end() || !request->is_object()) {
    return fail("the AdmissionReview has no request");
  }
  AdmissionRequest out;
  auto uid = optionalString(*request, "uid");
  if (!uid) {
    return fail(uid.error());
  }
  if (uid->empty()) {
    return fail("the AdmissionReview request has no uid");
  }
  out.uid = *uid;
  if (auto k = request->find("kind"); k != request->end() && !k->is_null()) {
    if (!k->is_object()) {
      return fail("request.kind is not an object");
    }
    for (auto [key, target] : {std::pair{"group", &out.group}, std::pair{"version", &out.version},
                               std::pair{"kind", &out.kind}}) {
      auto value = optionalString(*k, key);
      if (!value) {
        return fail(value.error());
      }
      *target = *value;
    }
  }
  for (auto [key, target] :
       {std::pair{"subResource", &out.subResource}, std::pair{"operation", &out.operation},
        std::pair{"namespace", &out.ns}, std::pair{"name", &out.name}}) {
    auto value = optionalString(*request, key);
    if (!value) {
      return fail(value.error());
    }
    *target = *value;
  }
  if (auto dryRun = request->find("dryRun"); dryRun != request->end() && !dryRun->is_null()) {
    if (!dryRun->is_boolean()) {
      return fail("request.dryRun is not a boolean");
    }
    out.dryRun = dryRun->get<bool>();
  }
  if (auto object = request->find("object"); object != request->end()) {
    if (!object->is_null() && !object->is_object()) {
      return fail("request.object is not an object");
    }
    out.object = std::move(*object);  // the review is not kept: one copy of the pod
  }
  return out;
}

std::string renderAdmissionReview(const AdmissionResponse& response) {
  // Written as text, members in key order (the bytes nlohmann's compact dump gives): the
  // answer is mostly the patch in base64, which needs no escaping, so it is not put
  // through the serializer a byte at a time.
  const std::string patch = response.allowed && !response.patch.empty()
                                ? base64Encode(response.patch.dump())
                                : std::string();
  std::string out;
  out.reserve(160 + patch.size() + response.uid.size() + response.message.size());
  out += R"({"apiVersion":")";
  out += kApiVersion;
  out += R"(","kind":"AdmissionReview","response":{"allowed":)";
  out += response.allowed ? "true" : "false";
  if (!patch.empty()) {
    out += R"(,"patch":")";
    out += patch;
    out += R"(","patchType":"JSONPatch")";
  }
  if (!response.allowed) {
    out += R"(,"status":{"code":)";
    out += std::to_string(response.code);
    out += R"(,"message":)";
    out += compactJson(response.message);
    out += '}';
  }
  out += R"(,"uid":)";
  out += compactJson(response.uid);
  if (!response.warnings.empty()) {
    out += R"(,"warnings":)";
    out += compactJson(response.warnings);
  }
  out += "}}";
  return out;
}

}  // namespace gvirtus::webhook
