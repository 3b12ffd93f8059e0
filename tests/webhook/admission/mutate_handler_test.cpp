#include "webhook/admission/mutate_handler.h"

#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "common/telemetry/metrics.h"
#include "support/manual_clock.h"
#include "webhook/base/metrics.h"
#include "webhook/fixtures.h"
#include "webhook/release/controller.h"

using namespace gvirtus::webhook;
using namespace gvirtus::webhook::testing;

namespace {

struct Harness {
  FakeBackendSource source{
      {backend("10.0.0.1", 3, 16, "backend-a"), backend("10.0.0.2", 1, 16, "backend-b")}};
  BackendChooser chooser;
  gvirtus::MetricsRegistry registry;
  WebhookMetrics metrics{registry};
  MutateHandler handler{MutateConfig{}, source, chooser, &metrics};

  // Posts one review; returns the parsed AdmissionReview answer.
  json post(const json& review) {
    auto response = handler.handle(review.dump());
    INFO(response.body);
    REQUIRE(response.status == 200);
    CHECK(response.contentType == "application/json");
    json answer = json::parse(response.body);
    CHECK(answer["response"]["uid"] == review["request"]["uid"]);
    return answer;
  }
};

const json& annotations(const json& pod) {
  return pod["metadata"]["annotations"];
}

}  // namespace

TEST_CASE("a GVirtuS pod gets a backend, its properties and the wiring", "[mutate]") {
  Harness h;
  const json pod = gvirtusPod();
  const json answer = h.post(admissionReview(pod, "uid-42"));
  CHECK(answer["response"]["allowed"] == true);
  const json out = applied(pod, patchOf(answer));
  CHECK(annotations(out)["gvirtus.io/backend"] == "10.0.0.2:9999");
  CHECK(annotations(out)["gvirtus.io/backend-pod"] == "gvirtus-system/backend-b");
  const json properties = json::parse(annotations(out)["gvirtus.io/properties"].get<std::string>());
  CHECK(properties["communicator"][0]["endpoint"]["server_address"] == "10.0.0.2");
  CHECK(properties["communicator"][0]["endpoint"]["port"] == "9999");
  CHECK(out["spec"]["volumes"][0]["name"] == "gvirtus-config");
  CHECK(out["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] == "/etc/gvirtus");
  CHECK(out["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1");
  CHECK(out["spec"]["nodeSelector"]["gvirtus.io/frontend.allowed"] == "true");
  CHECK(out["spec"]["containers"][0]["command"] == pod["spec"]["containers"][0]["command"]);
  CHECK(h.chooser.recentAssignments("10.0.0.2:9999") == 1);
  CHECK_THAT(h.registry.render(),
             Catch::Contains("gvirtus_webhook_backend_choices_total{backend=\"10.0.0.2:9999\"} 1"));
  CHECK_THAT(h.registry.render(),
             Catch::Contains("gvirtus_webhook_reviews_total{result=\"patched\"} 1"));
}

TEST_CASE("a reinvoked webhook, or the patch applied twice, changes nothing more", "[mutate]") {
  Harness h;
  json pod = gvirtusPod({"app", "worker"});
  pod["spec"]["nodeSelector"] = {{"disk", "ssd"}};
  pod["metadata"]["annotations"] = {{"gvirtus.io/containers", "worker"}};
  const json patch = patchOf(h.post(admissionReview(pod)));
  const json once = applied(pod, patch);
  // The webhook again, on its own result: an empty patch, the same backend. (It cannot
  // tell this from a pod pinned by its author, so the pod counts once more; the manifest
  // never reinvokes it.)
  const json answer = h.post(admissionReview(once, "uid-2"));
  CHECK(patchOf(answer).empty());
  CHECK(h.chooser.recentAssignments("10.0.0.2:9999") == 2);
  CHECK(h.chooser.recentAssignments("10.0.0.1:9999") == 0);
  // The same patch applied to its own result changes nothing more.
  CHECK(applied(once, patch) == once);
}

TEST_CASE("a dry run gets the same patch and records nothing", "[mutate]") {
  Harness h;
  const json pod = gvirtusPod();
  const json dry = patchOf(h.post(admissionReview(pod, "uid-1", "CREATE", true)));
  CHECK(h.chooser.recentAssignments("10.0.0.2:9999") == 0);
  CHECK_THAT(h.registry.render(),
             !Catch::Contains("gvirtus_webhook_backend_choices_total{backend="));
  const json real = patchOf(h.post(admissionReview(pod, "uid-2")));
  CHECK(dry == real);
  CHECK(h.chooser.recentAssignments("10.0.0.2:9999") == 1);
}

TEST_CASE("four pods spread by least-connections", "[mutate]") {
  Harness h;
  std::vector<std::string> chosen;
  for (int i = 0; i < 4; ++i) {
    const json pod = gvirtusPod();
    const json out =
        applied(pod, patchOf(h.post(admissionReview(pod, "uid-" + std::to_string(i)))));
    chosen.push_back(annotations(out)["gvirtus.io/backend"]);
  }
  // b has 1 connection, a 3: b, b, then one each at the tie at 3.
  CHECK(std::vector(chosen.begin(), chosen.begin() + 2) ==
        std::vector<std::string>{"10.0.0.2:9999", "10.0.0.2:9999"});
  CHECK(std::set(chosen.begin() + 2, chosen.end()) ==
        std::set<std::string>{"10.0.0.1:9999", "10.0.0.2:9999"});
}

TEST_CASE("a pod pinned by its author to a known backend that can take it keeps it", "[mutate]") {
  Harness h;
  json pod = gvirtusPod();
  // Pinned to the busier backend, with a forged backend-pod: the webhook writes its own.
  pod["metadata"]["annotations"] = {{"gvirtus.io/backend", "10.0.0.1:9999"},
                                    {"gvirtus.io/backend-pod", "default/not-a-backend"}};
  const json answer = h.post(admissionReview(pod));
  CHECK(answer["response"]["allowed"] == true);
  const json out = applied(pod, patchOf(answer));
  CHECK(annotations(out)["gvirtus.io/backend"] == "10.0.0.1:9999");
  CHECK(annotations(out)["gvirtus.io/backend-pod"] == "gvirtus-system/backend-a");
  CHECK_THAT(annotations(out)["gvirtus.io/properties"].get<std::string>(),
             Catch::Contains("\"server_address\":\"10.0.0.1\",\"port\":\"9999\""));
  // Counted like a choice, so that maxSessions holds for pinned pods too.
  CHECK(h.chooser.recentAssignments("10.0.0.1:9999") == 1);
}

TEST_CASE("a pod pinned by its author to an unknown address is denied", "[mutate]") {
  Harness h;
  json pod = gvirtusPod();
  pod["metadata"]["annotations"] = {{"gvirtus.io/backend", "192.0.2.9:7777"}};
  const json answer = h.post(admissionReview(pod));
  CHECK(answer["response"]["allowed"] == false);
  CHECK(answer["response"]["status"]["code"] == 403);
  CHECK_THAT(answer["response"]["status"]["message"].get<std::string>(),
             Catch::Contains("192.0.2.9:7777") && Catch::Contains("not a known GVirtuS backend"));
  CHECK(h.chooser.recentAssignments("192.0.2.9:7777") == 0);
  CHECK_THAT(h.registry.render(),
             Catch::Contains("gvirtus_webhook_reviews_total{result=\"denied\"} 1"));
}

TEST_CASE("a pod pinned by its author to a backend that cannot take it is denied", "[mutate]") {
  FakeBackendSource source{{backend("10.0.0.1", 16, 16, "backend-a")}};
  BackendChooser chooser;
  MutateHandler handler{MutateConfig{}, source, chooser, nullptr};
  json pod = gvirtusPod();
  pod["metadata"]["annotations"] = {{"gvirtus.io/backend", "10.0.0.1:9999"}};
  const json answer = json::parse(handler.handle(admissionReview(pod).dump()).body);
  CHECK(answer["response"]["allowed"] == false);
  CHECK_THAT(answer["response"]["status"]["message"].get<std::string>(),
             Catch::Contains("cannot take this pod") && Catch::Contains("maxSessions"));
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 0);
}

TEST_CASE("large reviews are answered one after another, and the memory is given back",
          "[mutate]") {
  FakeBackendSource source{{backend("10.0.0.1", 0, 16, "backend-a")}};
  BackendChooser chooser;
  MutateConfig config;
  config.largeReviewBytes = 64 * 1024;
  config.largeReviewsAtOnce = 1;
  MutateHandler handler{config, source, chooser, nullptr};
  json pod = gvirtusPod();
  pod["metadata"]["annotations"] = {{"example.com/blob", std::string(200'000, 'x')}};
  // Sequential large reviews each take and give back the one slot: none waits.
  for (int i = 0; i < 3; ++i) {
    auto response = handler.handle(admissionReview(pod, "uid-" + std::to_string(i)).dump());
    REQUIRE(response.status == 200);
    CHECK(json::parse(response.body)["response"]["allowed"] == true);
  }
  CHECK(chooser.recentAssignments("10.0.0.1:9999") == 3);
}

namespace {
// Holds every review inside backends() until released: a review in progress.
class HeldBackendSource : public FakeBackendSource {
 public:
  using FakeBackendSource::FakeBackendSource;
  BackendSnapshot backends() const override {
    std::unique_lock lock(heldMutex_);
    ++entered_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return released_; });
    return FakeBackendSource::backends();
  }
  void waitEntered() {
    std::unique_lock lock(heldMutex_);
    changed_.wait(lock, [&] { return entered_ > 0; });
  }
  void release() {
    std::lock_guard lock(heldMutex_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  mutable std::mutex heldMutex_;
  mutable std::condition_variable changed_;
  mutable int entered_ = 0;
  bool released_ = false;
};
}  // namespace

TEST_CASE("a large review beyond the ones allowed at once gets 503 instead of memory", "[mutate]") {
  HeldBackendSource source{{backend("10.0.0.1", 0, 16, "backend-a")}};
  BackendChooser chooser;
  MutateConfig config;
  config.largeReviewBytes = 64 * 1024;
  config.largeReviewsAtOnce = 1;
  config.largeReviewWait = std::chrono::milliseconds(50);
  MutateHandler handler{config, source, chooser, nullptr};
  json pod = gvirtusPod();
  pod["metadata"]["annotations"] = {{"example.com/blob", std::string(100'000, 'x')}};
  const std::string body = admissionReview(pod).dump();
  gvirtus::HttpResponse first;
  std::thread inProgress([&] { first = handler.handle(body); });
  source.waitEntered();
  // The one slot is taken: a second large review waits 50 ms, then is refused.
  const gvirtus::HttpResponse second = handler.handle(body);
  CHECK(second.status == 503);
  CHECK_THAT(second.body, Catch::Contains("too many large AdmissionReviews"));
  source.release();
  inProgress.join();
  CHECK(first.status == 200);
  CHECK(handler.handle(body).status == 200);
}

TEST_CASE("a small body with many values counts as a large review", "[mutate]") {
  HeldBackendSource source{{backend("10.0.0.1", 0, 16, "backend-a")}};
  BackendChooser chooser;
  MutateConfig config;
  config.largeReviewValues = 5'000;
  config.largeReviewsAtOnce = 1;
  config.largeReviewWait = std::chrono::milliseconds(50);
  MutateHandler handler{config, source, chooser, nullptr};
  json pod = gvirtusPod();
  pod["spec"]["x"] = json::array();
  for (int i = 0; i < 6'000; ++i) {
    pod["spec"]["x"].push_back(0);
  }
  const std::string body = admissionReview(pod).dump();
  REQUIRE(body.size() < config.largeReviewBytes);  // small by its size alone
  gvirtus::HttpResponse first;
  std::thread inProgress([&] { first = handler.handle(body); });
  source.waitEntered();
  CHECK(handler.handle(body).status == 503);
  source.release();
  inProgress.join();
  CHECK(first.status == 200);
}

TEST_CASE("a member of a KAI PodGroup waits for its gang even when a backend has room",
          "[mutate]") {
  Harness h;
  json pod = gvirtusPod();
  pod["metadata"]["annotations"] = {{"pod-group-name", "trainers"}};
  const json answer = h.post(admissionReview(pod));
  CHECK(answer["response"]["allowed"] == true);
  const json out = applied(pod, patchOf(answer));
  CHECK(out["spec"]["schedulingGates"] == json::parse(R"([{"name":"gvirtus.io/backend"}])"));
  CHECK(annotations(out)["gvirtus.io/backend-status"] == "waiting");
  CHECK_FALSE(annotations(out).contains("gvirtus.io/backend"));
  CHECK_THAT(answer["response"]["warnings"][0].get<std::string>(),
             Catch::Contains("KAI PodGroup trainers"));
  CHECK(h.chooser.recentAssignments("10.0.0.1:9999") == 0);
  CHECK(h.chooser.recentAssignments("10.0.0.2:9999") == 0);
}

TEST_CASE("other kinds, operations and unlabelled pods are allowed unchanged", "[mutate]") {
  Harness h;
  json unlabelled = gvirtusPod();
  unlabelled["metadata"]["labels"] = {{"app", "web"}};
  json disabled = gvirtusPod();
  disabled["metadata"]["labels"]["gvirtus.io/enabled"] = "false";
  json configMap = admissionReview(gvirtusPod());
  configMap["request"]["kind"] = {{"group", ""}, {"version", "v1"}, {"kind", "ConfigMap"}};
  json binding = admissionReview(gvirtusPod());
  binding["request"]["subResource"] = "binding";
  json deletion = admissionReview(gvirtusPod(), "u", "DELETE");
  deletion["request"]["object"] = nullptr;
  for (const json& review : {admissionReview(unlabelled), admissionReview(disabled), configMap,
                             binding, admissionReview(gvirtusPod(), "u", "UPDATE"), deletion}) {
    const json answer = h.post(review);
    CHECK(answer["response"]["allowed"] == true);
    CHECK_FALSE(answer["response"].contains("patch"));
    CHECK_FALSE(answer["response"].contains("warnings"));
  }
  CHECK(h.chooser.recentAssignments("10.0.0.2:9999") == 0);
}

TEST_CASE("an unknown container name is denied, naming it", "[mutate]") {
  Harness h;
  json pod = gvirtusPod({"app"});
  pod["metadata"]["annotations"] = {{"gvirtus.io/containers", "trainer"}};
  const json answer = h.post(admissionReview(pod));
  CHECK(answer["response"]["allowed"] == false);
  CHECK(answer["response"]["status"]["code"] == 400);
  CHECK_THAT(answer["response"]["status"]["message"].get<std::string>(),
             Catch::Contains("\"trainer\""));
  CHECK(h.chooser.recentAssignments("10.0.0.2:9999") == 0);
  CHECK_THAT(h.registry.render(),
             Catch::Contains("gvirtus_webhook_reviews_total{result=\"denied\"} 1"));
}

TEST_CASE("a host-network GVirtuS pod is denied on the label path and the claim path", "[mutate]") {
  json pod = gvirtusPod();
  pod["spec"]["hostNetwork"] = true;
  for (const std::string& claimTemplate : {std::string(), std::string("gvirtus-gpu")}) {
    INFO(claimTemplate);
    FakeBackendSource source{{backend("10.0.0.1", 0, 16, "backend-a")}};
    BackendChooser chooser;
    MutateConfig config;
    config.claimTemplate = claimTemplate;
    MutateHandler handler{config, source, chooser, nullptr};
    const json answer = json::parse(handler.handle(admissionReview(pod).dump()).body);
    CHECK(answer["response"]["allowed"] == false);
    CHECK(answer["response"]["status"]["code"] == 400);
    CHECK(answer["response"]["status"]["message"] ==
          "a GVirtuS pod cannot use the host network (spec.hostNetwork): its backend admits "
          "sessions by the pod's own address");
    CHECK(chooser.recentAssignments("10.0.0.1:9999") == 0);
  }
  // Without the label the webhook leaves a host-network pod alone.
  Harness h;
  json plain = pod;
  plain["metadata"]["labels"].erase("gvirtus.io/enabled");
  CHECK(h.post(admissionReview(plain))["response"]["allowed"] == true);
}

TEST_CASE("an unreadable gpu-memory annotation is denied, naming it", "[mutate]") {
  Harness h;
  json pod = gvirtusPod();
  pod["metadata"]["annotations"] = {{"gvirtus.io/gpu-memory", "lots"}};
  const json answer = h.post(admissionReview(pod));
  CHECK(answer["response"]["allowed"] == false);
  CHECK_THAT(answer["response"]["status"]["message"].get<std::string>(),
             Catch::Contains("gvirtus.io/gpu-memory"));
}

TEST_CASE("no backend: the pod waits behind a scheduling gate, with a warning", "[mutate]") {
  Harness h;
  h.source.set({});
  const json pod = gvirtusPod();
  const json answer = h.post(admissionReview(pod));
  CHECK(answer["response"]["allowed"] == true);
  REQUIRE(answer["response"]["warnings"].size() == 1);
  CHECK_THAT(answer["response"]["warnings"][0].get<std::string>(),
             Catch::Contains("no GVirtuS backend is ready"));
  const json out = applied(pod, patchOf(answer));
  CHECK(out["spec"]["schedulingGates"] == json::parse(R"([{"name":"gvirtus.io/backend"}])"));
  CHECK(annotations(out)["gvirtus.io/backend-status"] == "waiting");
  CHECK_FALSE(annotations(out).contains("gvirtus.io/backend"));
  // Wired already, so that releasing it later is only the backend annotations.
  CHECK(out["spec"]["volumes"][0]["name"] == "gvirtus-config");
  CHECK_THAT(h.registry.render(),
             Catch::Contains("gvirtus_webhook_reviews_total{result=\"waiting\"} 1"));

  // A GPU memory request no backend meets gives the reason.
  h.source.set({backend("10.0.0.1")});
  json big = gvirtusPod();
  big["metadata"]["annotations"] = {{"gvirtus.io/gpu-memory", "1Ti"}};
  const json waiting = h.post(admissionReview(big));
  CHECK_THAT(waiting["response"]["warnings"][0].get<std::string>(),
             Catch::Contains("1 without a GPU with 1048576 MiB free"));
}

TEST_CASE("gpu-scheduling-map pods", "[mutate]") {
  Harness h;
  const std::string map = "0=node1:0,1\n1=node2:2\n2=node3:0,1,2\n3=node4:3\n4=node4:3\n";
  auto statefulPod = [&](int index) {
    return json{{"metadata",
                 {{"name", "web-" + std::to_string(index)},
                  {"namespace", "default"},
                  {"labels", {{"apps.kubernetes.io/pod-index", std::to_string(index)}}},
                  {"annotations", {{"gpu-scheduling-map", map}}}}},
                {"spec", {{"containers", json::array({{{"name", "app"}, {"image", "x"}}})}}}};
  };

  SECTION("an entry pins the pod") {
    const json pod = statefulPod(2);
    const json out = applied(pod, patchOf(h.post(admissionReview(pod))));
    CHECK(out["spec"]["containers"][0]["env"] ==
          json::parse(R"([{"name":"CUDA_VISIBLE_DEVICES","value":"0,1,2"}])"));
    CHECK(out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
             ["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == json::array({"node3"}));
    CHECK_FALSE(out["metadata"]["annotations"].contains("gvirtus.io/backend"));
    CHECK(patchOf(h.post(admissionReview(out))).empty());
  }
  SECTION("no entry: allowed unchanged with a warning") {
    const json answer = h.post(admissionReview(statefulPod(5)));
    CHECK(answer["response"]["allowed"] == true);
    CHECK_FALSE(answer["response"].contains("patch"));
    CHECK(answer["response"]["warnings"] ==
          json::array({"gpu-scheduling-map has no entry for pod 5; placed freely"}));
  }
  SECTION("a broken map is denied, naming the line") {
    json pod = statefulPod(0);
    pod["metadata"]["annotations"]["gpu-scheduling-map"] = "0=node1:0\n1=node2:x\n";
    const json answer = h.post(admissionReview(pod));
    CHECK(answer["response"]["allowed"] == false);
    CHECK(answer["response"]["status"]["message"] ==
          "gpu-scheduling-map line 2 (\"1=node2:x\"): devices \"x\" are not comma-separated "
          "integers");
  }
  SECTION("a GVirtuS pod with a map gets both") {
    json pod = statefulPod(1);
    pod["metadata"]["labels"]["gvirtus.io/enabled"] = "true";
    const json out = applied(pod, patchOf(h.post(admissionReview(pod))));
    CHECK(out["metadata"]["annotations"]["gvirtus.io/backend"] == "10.0.0.2:9999");
    CHECK(out["spec"]["containers"][0]["env"].size() == 2);
    CHECK(patchOf(h.post(admissionReview(out))).empty());
  }
}

TEST_CASE("bad bodies are answered 400 with a message", "[mutate]") {
  Harness h;
  for (const std::string& body :
       {std::string("not json"), std::string("{}"), std::string(R"({"kind":"AdmissionReview"})"),
        std::string(
            R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}})")}) {
    auto response = h.handler.handle(body);
    CHECK(response.status == 400);
    CHECK_THAT(response.body, Catch::StartsWith("bad AdmissionReview: "));
  }
  MutateConfig small;
  small.maxRequestBytes = 100;
  MutateHandler limited(small, h.source, h.chooser);
  auto response = limited.handle(admissionReview(gvirtusPod()).dump());
  CHECK(response.status == 400);
  CHECK_THAT(response.body, Catch::Contains("larger than 100 bytes"));
  CHECK_THAT(h.registry.render(),
             Catch::Contains("gvirtus_webhook_reviews_total{result=\"invalid\"} 4"));
}

TEST_CASE("a KAI gpu-fraction counts against the backend's GPU at admission", "[mutate]") {
  Harness h;
  h.source.set({backend("10.0.0.1", 0, 16, "backend-a")});  // one GPU: 80896 of 81920 free
  json half = gvirtusPod();
  half["metadata"]["annotations"] = {{"gpu-fraction", "0.5"}};
  const json first = applied(half, patchOf(h.post(admissionReview(half))));
  CHECK(annotations(first)["gvirtus.io/backend"] == "10.0.0.1:9999");
  // The first half is taken (until the load report shows it): the second one waits.
  const json answer = h.post(admissionReview(half, "uid-2"));
  REQUIRE(answer["response"]["warnings"].size() == 1);
  CHECK_THAT(answer["response"]["warnings"][0].get<std::string>(),
             Catch::Contains("1 without a GPU with 0.5 of its memory free"));
  CHECK(applied(half, patchOf(answer))["spec"]["schedulingGates"][0]["name"] ==
        "gvirtus.io/backend");

  json bad = gvirtusPod();
  bad["metadata"]["annotations"] = {{"gpu-fraction", "2"}};
  const json denied = h.post(admissionReview(bad, "uid-3"));
  CHECK(denied["response"]["allowed"] == false);
  CHECK_THAT(denied["response"]["status"]["message"].get<std::string>(),
             Catch::Contains("gpu-fraction"));
}

TEST_CASE("the GPU limit is dropped for a KAI GPU share only where KAI schedules the pod",
          "[mutate]") {
  // A namespace's ResourceQuota on nvidia.com/gpu counts the pod unless KAI counts its share.
  json half = gvirtusPod();
  half["metadata"]["annotations"] = {{"gpu-fraction", "0.5"}};
  const auto limits = [](const json& pod) {
    return pod["spec"]["containers"][0]["resources"].value("limits", json::object());
  };
  Harness plain;
  const json unscheduled = applied(half, patchOf(plain.post(admissionReview(half))));
  CHECK(unscheduled["spec"]["schedulerName"] == "default-scheduler");
  CHECK(limits(unscheduled)["nvidia.com/gpu"] == "1");

  FakeBackendSource source{{backend("10.0.0.1", 0, 16, "backend-a")}};
  BackendChooser chooser;
  MutateConfig config;
  config.wiring.schedulerName = "kai-scheduler";
  MutateHandler kai(config, source, chooser);
  const json kaiPod =
      applied(half, patchOf(json::parse(kai.handle(admissionReview(half).dump()).body)));
  CHECK(kaiPod["spec"]["schedulerName"] == "kai-scheduler");
  CHECK_FALSE(limits(kaiPod).contains("nvidia.com/gpu"));
  // The same webhook, a pod that names another scheduler: the limit stays.
  json own = half;
  own["spec"]["schedulerName"] = "my-scheduler";
  const json ownPod =
      applied(own, patchOf(json::parse(kai.handle(admissionReview(own, "uid-2").dump()).body)));
  CHECK(limits(ownPod)["nvidia.com/gpu"] == "1");
}

namespace {

// The chooser's clock: the system time at the start, moved only when `clock` is advanced.
std::function<std::chrono::system_clock::time_point()> timeOf(
    const gvirtus::testing::ManualClock& clock) {
  return [&clock, start = clock.now(), base = std::chrono::system_clock::now()] {
    return base +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(clock.now() - start);
  };
}

}  // namespace

TEST_CASE("forged reviews hold backends only seconds: real pods get them after the flood",
          "[mutate]") {
  using namespace std::chrono_literals;
  gvirtus::testing::ManualClock clock;
  const auto now = timeOf(clock);
  ChooserOptions options;
  options.instance = "webhook-a";
  options.now = now;
  BackendChooser chooser(options);
  // Two backends of four sessions each.
  FakeBackendSource source{
      {backend("10.0.0.1", 0, 4, "backend-a"), backend("10.0.0.2", 0, 4, "backend-b")}};
  MutateHandler handler(MutateConfig{}, source, chooser);
  auto admit = [&](const json& pod, const std::string& uid) {
    auto response = handler.handle(admissionReview(pod, uid).dump());
    REQUIRE(response.status == 200);
    return applied(pod, patchOf(json::parse(response.body)));
  };
  auto realPod = [](const std::string& name) {
    json pod = gvirtusPod();
    pod["metadata"]["name"] = name;
    pod["metadata"]["namespace"] = "team-a";
    return pod;
  };

  // A real pod admitted before the flood, which the API server then creates.
  const json first = admit(realPod("real-0"), "uid-real-0");
  const std::string firstBackend = annotations(first)["gvirtus.io/backend"];

  // Whoever reaches the port posts non-dry-run reviews of pods that are never created, with
  // names and without (generateName), 200 in a row: every session is taken.
  int given = 0;
  for (int i = 0; i < 200; ++i) {
    json forged = realPod(i % 2 == 0 ? "forged-" + std::to_string(i) : "");
    if (i % 2 == 1) {
      forged["metadata"].erase("name");
      forged["metadata"]["generateName"] = "forged-";
    }
    const json out = admit(forged, "uid-forged-" + std::to_string(i));
    given += annotations(out).contains("gvirtus.io/backend") ? 1 : 0;
  }
  CHECK(given == 7);
  // A real pod created during the flood is admitted waiting behind the gate.
  json waiting = admit(realPod("real-1"), "uid-real-1");
  REQUIRE(waiting["spec"]["schedulingGates"] == json::parse(R"([{"name":"gvirtus.io/backend"}])"));

  // The webhook's cache shows the pods that exist; none of the forged ones.
  clock.advance(1s);
  std::vector<Backend> seen = *source.backends();
  for (auto& b : seen) {
    if (b.endpoint() == firstBackend) {
      b.assigned = {AssignedPod{now(), "webhook-a", "team-a/real-0"}};
    }
  }
  source.set(seen);

  // Seconds later the forged reservations have lapsed: the waiting pod is released...
  clock.advance(5s);
  waiting["metadata"]["uid"] = "uid-real-1";
  waiting["metadata"]["resourceVersion"] = "7";
  json stored = waiting;
  auto write = [&](const json&, const gvirtus::JsonPatch& patch) -> gvirtus::Result<void> {
    auto result = gvirtus::applyJsonPatch(stored, patch.toJson());
    if (!result) {
      return gvirtus::fail(result.error());
    }
    stored = *result;
    return {};
  };
  const auto outcomes = releaseWaitingPods({std::make_shared<const json>(waiting)},
                                           *source.backends(), chooser, {}, write);
  REQUIRE(outcomes.size() == 1);
  CHECK(outcomes[0].kind == PodOutcome::Kind::Released);
  CHECK(annotations(stored).contains("gvirtus.io/backend"));
  CHECK(stored["spec"].value("schedulingGates", json::array()).empty());
  // ... and a real pod created now gets a backend at admission.
  const json third = admit(realPod("real-2"), "uid-real-2");
  CHECK(annotations(third).contains("gvirtus.io/backend"));
  // What counts: the first real pod (seen), the released one (it exists) and the newest.
  CHECK(chooser.recentAssignments("10.0.0.1:9999") + chooser.recentAssignments("10.0.0.2:9999") ==
        3);
  CHECK(chooser.unconfirmedAssignments("10.0.0.1:9999") +
            chooser.unconfirmedAssignments("10.0.0.2:9999") ==
        1);
}
