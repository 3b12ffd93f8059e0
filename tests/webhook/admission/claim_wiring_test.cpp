// The claim path of a GVirtuS pod (--dra-claim-template): what wireClaim() adds, and the
// review that takes it instead of choosing a backend. On real nodes:
// tests/e2e/real/scenarios/79-dra-claims.sh.
#include "webhook/admission/claim_wiring.h"

#include <catch2/catch.hpp>

#include "common/telemetry/metrics.h"
#include "webhook/admission/mutate_handler.h"
#include "webhook/base/metrics.h"
#include "webhook/fixtures.h"

using namespace gvirtus::webhook;
using namespace gvirtus::webhook::testing;

TEST_CASE("a claim from the template for the pod, used by each wired container", "[claim-wiring]") {
  json pod = gvirtusPod({"app", "sidecar"});
  pod["metadata"]["annotations"]["gvirtus.io/containers"] = "app";
  REQUIRE(wireClaim(pod, "gpu-16gi"));
  CHECK(pod["spec"]["resourceClaims"] ==
        json::array({{{"name", "gvirtus-gpu"}, {"resourceClaimTemplateName", "gpu-16gi"}}}));
  CHECK(pod["spec"]["containers"][0]["resources"]["claims"] ==
        json::array({{{"name", "gvirtus-gpu"}}}));
  CHECK_FALSE(pod["spec"]["containers"][1].value("resources", json::object()).contains("claims"));
  CHECK(pod["metadata"]["labels"]["gvirtus.io/dra"] == "true");
  CHECK(pod["metadata"]["labels"]["gvirtus.io/enabled"] == "true");

  // Again: nothing more.
  const json once = pod;
  REQUIRE(wireClaim(pod, "gpu-16gi"));
  CHECK(pod == once);
}

TEST_CASE("the pod's own claims stay and an entry of ours under its name is refused",
          "[claim-wiring]") {
  json pod = gvirtusPod();
  pod["spec"]["resourceClaims"] =
      json::array({{{"name", "scratch"}, {"resourceClaimName", "shared-disk"}}});
  pod["spec"]["containers"][0]["resources"] = {{"claims", json::array({{{"name", "scratch"}}})}};
  REQUIRE(wireClaim(pod, "gpu"));
  CHECK(pod["spec"]["resourceClaims"].size() == 2);
  CHECK(pod["spec"]["containers"][0]["resources"]["claims"].size() == 2);

  json forged = gvirtusPod();
  forged["spec"]["resourceClaims"] =
      json::array({{{"name", "gvirtus-gpu"}, {"resourceClaimTemplateName", "huge"}}});
  auto wired = wireClaim(forged, "gpu");
  REQUIRE_FALSE(wired);
  CHECK_THAT(wired.error().message, Catch::Contains("does not use ResourceClaimTemplate gpu"));

  json unknown = gvirtusPod();
  unknown["metadata"]["annotations"]["gvirtus.io/containers"] = "nope";
  CHECK_FALSE(wireClaim(unknown, "gpu"));
}

TEST_CASE("with a claim template the review wires the claim and chooses no backend",
          "[claim-wiring][mutate]") {
  FakeBackendSource source{{backend("10.0.0.1", 0, 16, "backend-a")}};
  BackendChooser chooser;
  gvirtus::MetricsRegistry registry;
  WebhookMetrics metrics{registry};
  MutateConfig config;
  config.claimTemplate = "gpu-16gi";
  MutateHandler handler{config, source, chooser, &metrics};

  json pod = gvirtusPod();
  pod["metadata"]["annotations"]["gvirtus.io/gpu-memory"] = "8Gi";
  pod["metadata"]["annotations"]["gvirtus.io/backend"] = "10.0.0.1:9999";
  auto response = handler.handle(admissionReview(pod).dump());
  REQUIRE(response.status == 200);
  const json answer = json::parse(response.body);
  CHECK(answer["response"]["allowed"] == true);
  const json out = applied(pod, patchOf(answer));
  CHECK(out["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == "gpu-16gi");
  CHECK(out["metadata"]["labels"]["gvirtus.io/dra"] == "true");
  // None of the webhook path: no backend, gate, properties volume or GPU limit.
  CHECK_FALSE(out["metadata"]["annotations"].contains("gvirtus.io/backend"));
  CHECK_FALSE(out["spec"].contains("schedulingGates"));
  CHECK_FALSE(out["spec"].contains("volumes"));
  CHECK_FALSE(out["spec"]["containers"][0]["resources"].contains("limits"));
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 0);
  REQUIRE(answer["response"]["warnings"].size() == 1);
  CHECK_THAT(answer["response"]["warnings"][0].get<std::string>(),
             Catch::Contains("ignored: gvirtus.io/gpu-memory, gvirtus.io/backend"));
}

TEST_CASE("what only the webhook path writes is removed, were the author to write it",
          "[claim-wiring]") {
  // Read elsewhere: a forged backend would put the pod on that backend's peer list and
  // count a share against its GPU; a forged gate would have the waiting-pod controller give
  // it a second backend.
  json pod = gvirtusPod();
  pod["metadata"]["annotations"]["gvirtus.io/backend"] = "10.0.0.9:9999";
  pod["metadata"]["annotations"]["gvirtus.io/backend-pod"] = "gvirtus-system/be-9";
  pod["metadata"]["annotations"]["gvirtus.io/backend-gpu"] = "0";
  pod["metadata"]["annotations"]["gvirtus.io/assigned-by"] = "gvirtus-webhook-x";
  pod["metadata"]["annotations"]["gvirtus.io/backend-status"] = "waiting";
  pod["metadata"]["annotations"]["example.com/note"] = "kept";
  pod["spec"]["schedulingGates"] =
      json::array({{{"name", "gvirtus.io/backend"}}, {{"name", "example.com/later"}}});
  REQUIRE(wireClaim(pod, "gpu"));
  CHECK(pod["metadata"]["annotations"] == json{{"example.com/note", "kept"}});
  CHECK(pod["spec"]["schedulingGates"] == json::array({{{"name", "example.com/later"}}}));
}

namespace {

// A pod as an unchanged manifest asks for the extended resource: no GVirtuS label.
json extendedResourcePod(const json& quantity = "1") {
  json pod = gvirtusPod({"app", "sidecar"});
  pod["metadata"]["labels"].erase("gvirtus.io/enabled");
  pod["spec"]["containers"][0]["resources"]["limits"]["gvirtus.io/gpu"] = quantity;
  return pod;
}

}  // namespace

TEST_CASE("a pod asking for the extended resource is labelled for the peers and nothing else",
          "[claim-wiring]") {
  json pod = extendedResourcePod();
  pod["metadata"]["annotations"]["gvirtus.io/backend"] = "10.0.0.9:9999";
  CHECK(asksForResource(pod, "gvirtus.io/gpu"));
  CHECK_FALSE(asksForResource(pod, "nvidia.com/gpu"));
  const json asked = pod;
  REQUIRE(wireExtendedResource(pod, "gvirtus.io/gpu"));
  CHECK(pod["metadata"]["labels"]["gvirtus.io/dra"] == "true");
  CHECK_FALSE(pod["metadata"].contains("annotations"));
  CHECK(pod["spec"] == asked["spec"]);  // kube-scheduler makes the claim

  const json once = pod;
  REQUIRE(wireExtendedResource(pod, "gvirtus.io/gpu"));
  CHECK(pod == once);

  json client = extendedResourcePod(1);
  CHECK(wireExtendedResource(client, "gvirtus.io/gpu"));
  json inInit = extendedResourcePod();
  inInit["spec"]["containers"][0]["resources"].erase("limits");
  inInit["spec"]["initContainers"] =
      json::array({{{"name", "setup"}, {"resources", {{"requests", {{"gvirtus.io/gpu", "1"}}}}}}});
  CHECK(asksForResource(inInit, "gvirtus.io/gpu"));
}

TEST_CASE("a pod asking for more than one remote GPU is refused, naming what it asked",
          "[claim-wiring]") {
  for (const json& quantity : {json("2"), json(2), json("0"), json("500m"), json("1k")}) {
    INFO(quantity.dump());
    json pod = extendedResourcePod(quantity);
    auto wired = wireExtendedResource(pod, "gvirtus.io/gpu");
    REQUIRE_FALSE(wired);
    CHECK_THAT(wired.error().message,
               Catch::StartsWith("container app asks for " + quantity.dump() + " gvirtus.io/gpu"));
  }
  json two = extendedResourcePod();
  two["spec"]["containers"][1]["resources"]["limits"]["gvirtus.io/gpu"] = "1";
  auto wired = wireExtendedResource(two, "gvirtus.io/gpu");
  REQUIRE_FALSE(wired);
  CHECK_THAT(wired.error().message,
             Catch::StartsWith("containers app and sidecar both ask for gvirtus.io/gpu"));
  // A limit and a request in one container are one ask.
  json both = extendedResourcePod();
  both["spec"]["containers"][0]["resources"]["requests"]["gvirtus.io/gpu"] = "1";
  CHECK(wireExtendedResource(both, "gvirtus.io/gpu"));
}

TEST_CASE("the review labels an extended-resource pod, and refuses what cannot work",
          "[claim-wiring][mutate]") {
  FakeBackendSource source{{backend("10.0.0.1", 0, 16, "backend-a")}};
  BackendChooser chooser;
  MutateConfig config;
  config.extendedResource = "gvirtus.io/gpu";
  MutateHandler handler{config, source, chooser};
  auto review = [&](const json& pod) {
    return json::parse(handler.handle(admissionReview(pod).dump()).body);
  };

  const json pod = extendedResourcePod();
  const json answer = review(pod);
  REQUIRE(answer["response"]["allowed"] == true);
  const json out = applied(pod, patchOf(answer));
  CHECK(out["metadata"]["labels"]["gvirtus.io/dra"] == "true");
  CHECK_FALSE(out["metadata"].contains("annotations"));  // no backend of the webhook's
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 0);

  json labelled = extendedResourcePod();
  labelled["metadata"]["labels"]["gvirtus.io/enabled"] = "true";
  json onHost = extendedResourcePod();
  onHost["spec"]["hostNetwork"] = true;
  for (const auto& [refused, reason] :
       {std::pair{labelled, std::string("one way: the label gvirtus.io/enabled or the resource "
                                        "gvirtus.io/gpu, not both")},
        std::pair{onHost, std::string("cannot use the host network")},
        std::pair{extendedResourcePod("2"), std::string("ask for 1")}}) {
    const json denied = review(refused);
    CHECK(denied["response"]["allowed"] == false);
    CHECK_THAT(denied["response"]["status"]["message"].get<std::string>(), Catch::Contains(reason));
  }

  // Off (no --dra-extended-resource): the pod is none of ours.
  MutateHandler off{MutateConfig{}, source, chooser};
  const json untouched = json::parse(off.handle(admissionReview(pod).dump()).body);
  CHECK(untouched["response"]["allowed"] == true);
  CHECK_FALSE(untouched["response"].contains("patch"));
}
