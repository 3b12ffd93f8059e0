#include "webhook/admission/review.h"

#include <catch2/catch.hpp>

#include "webhook/fixtures.h"

using namespace gvirtus::webhook;
using namespace gvirtus::webhook::testing;

TEST_CASE("a pod CREATE review", "[admission-review]") {
  const json body = admissionReview(gvirtusPod(), "1234-abcd", "CREATE", true);
  auto request = parseAdmissionReview(body.dump());
  REQUIRE(request.has_value());
  CHECK(request->uid == "1234-abcd");
  CHECK(request->isPod());
  CHECK(request->operation == "CREATE");
  CHECK(request->ns == "default");
  CHECK(request->name == "trainer");
  CHECK(request->dryRun);
  CHECK(request->object["metadata"]["name"] == "trainer");
}

TEST_CASE("bodies that are not an AdmissionReview v1 are errors", "[admission-review]") {
  json noUid = admissionReview(gvirtusPod());
  noUid["request"].erase("uid");
  json v1beta1 = admissionReview(gvirtusPod());
  v1beta1["apiVersion"] = "admission.k8s.io/v1beta1";
  json badObject = admissionReview(gvirtusPod());
  badObject["request"]["object"] = "pod";
  json badDryRun = admissionReview(gvirtusPod());
  badDryRun["request"]["dryRun"] = "yes";
  std::string deep(1000, '[');
  for (const auto& [body, expected] : std::vector<std::pair<std::string, std::string>>{
           {"", "not JSON"},
           {"{\"kind\":", "not JSON"},
           {"[1,2]", "not a JSON object"},
           {R"({"kind":"Pod","apiVersion":"v1"})", "not an AdmissionReview"},
           {v1beta1.dump(), "only v1"},
           {R"({"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"})", "no request"},
           {noUid.dump(), "no uid"},
           {badObject.dump(), "request.object"},
           {badDryRun.dump(), "request.dryRun"},
           {deep, "nests deeper"}}) {
    INFO(body.substr(0, 80));
    auto request = parseAdmissionReview(body);
    REQUIRE_FALSE(request.has_value());
    CHECK_THAT(request.error().message, Catch::Contains(expected));
  }
}

TEST_CASE("a body with more values than a pod ever has is refused before parsing",
          "[admission-review]") {
  // 2 bytes a value, tens of bytes each once parsed: the shape of a memory attack.
  json many = admissionReview(gvirtusPod());
  many["request"]["object"]["metadata"]["annotations"]["x"] = "y";
  std::string body = many.dump();
  std::string tiny = "[";
  for (int i = 0; i < 150'000; ++i) {
    tiny += i == 0 ? "{}" : ",{}";
  }
  tiny += "]";
  const std::string crafted = body.replace(body.find("\"y\""), 3, tiny);
  auto refused = parseAdmissionReview(crafted);
  REQUIRE_FALSE(refused.has_value());
  CHECK_THAT(refused.error().message, Catch::Contains("more than 100000 JSON values"));
  // The same number of bytes in one string is a value like any other.
  json big = admissionReview(gvirtusPod());
  big["request"]["object"]["metadata"]["annotations"]["x"] = std::string(450'000, ',');
  auto allowed = parseAdmissionReview(big.dump());
  REQUIRE(allowed.has_value());
  CHECK(allowed->object["metadata"]["annotations"]["x"].get<std::string>().size() == 450'000);
}

TEST_CASE("the answer echoes the uid and carries a base64 JSON patch", "[admission-review]") {
  // Compact JSON with members in key order: the bytes nlohmann's dump writes.
  auto rendered = [](const AdmissionResponse& response) {
    const std::string text = renderAdmissionReview(response);
    const json review = json::parse(text);
    CHECK(text == review.dump());
    return review;
  };
  AdmissionResponse response = AdmissionResponse::allow("uid-9");
  response.patch.add("/metadata/labels", json{{"a", "b"}});
  response.warnings = {"careful", "a \"quoted\"\nline"};
  const json review = rendered(response);
  CHECK(review["apiVersion"] == "admission.k8s.io/v1");
  CHECK(review["kind"] == "AdmissionReview");
  CHECK(review["response"]["uid"] == "uid-9");
  CHECK(review["response"]["allowed"] == true);
  CHECK(review["response"]["patchType"] == "JSONPatch");
  CHECK(review["response"]["warnings"] == json::array({"careful", "a \"quoted\"\nline"}));
  CHECK(patchOf(review) ==
        json::parse(R"([{"op":"add","path":"/metadata/labels","value":{"a":"b"}}])"));

  const json plain = rendered(AdmissionResponse::allow("u"));
  CHECK(plain["response"] == json({{"uid", "u"}, {"allowed", true}}));

  const json denied = rendered(AdmissionResponse::deny("u\"1", 400, "no \\ way"));
  CHECK(denied["response"] == json({{"uid", "u\"1"},
                                    {"allowed", false},
                                    {"status", {{"code", 400}, {"message", "no \\ way"}}}}));
}

TEST_CASE("the shape of a text counts containers and separators outside strings only",
          "[admission-review]") {
  auto shape = [](std::string_view text) {
    const JsonShape s = shapeOf(text);
    return std::pair{s.depth, s.values};
  };
  CHECK(shape(R"({"a":[1,2,{"b":3}]})") == std::pair{3, std::size_t{5}});  // 3 containers, 2 commas
  // Brackets, commas and escaped quotes inside strings count for nothing.
  CHECK(shape(R"({"a":"[{,}]","b":"say \"[,]\"","c":"\\","d":"\\\"{"})") ==
        std::pair{1, std::size_t{4}});
  CHECK(shape(R"(["x\\\\",[[]]])") == std::pair{3, std::size_t{4}});
  // An unterminated string ends the count.
  CHECK(shape(R"([[1,"open [[[)") == std::pair{2, std::size_t{3}});
  CHECK(shape("") == std::pair{0, std::size_t{0}});
}
