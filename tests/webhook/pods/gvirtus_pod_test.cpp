// GvirtusPod: the record the webhook keeps of every GVirtuS pod holds all frontendFields()
// keeps, so that its document is that document again; and GvirtusPodStore, which holds
// the records and hands its readers the documents, with `old` rebuilt from the record.
#include "webhook/pods/gvirtus_pod.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "webhook/pods/gvirtus_pod_store.h"
#include "webhook/pods/pod_fields.h"

namespace gvirtus::webhook {
namespace {

using nlohmann::json;

// A GVirtuS pod as the API server sends it once the webhook gave it a backend.
json assigned(const std::string& name) {
  return {{"metadata",
           {{"name", name},
            {"namespace", "team-a"},
            {"uid", "0f7b7c1e-5c1a-4f7e-9b9a-3f2f7a6f1c2d"},
            {"resourceVersion", "1234"},
            {"creationTimestamp", "2026-11-27T10:00:00Z"},
            {"labels", {{"gvirtus.io/enabled", "true"}, {"app", "trainer"}}},
            {"annotations",
             {{"gvirtus.io/backend", "10.0.0.1:9999"},
              {"gvirtus.io/backend-pod", "gvirtus-system/be-1"},
              {"gvirtus.io/backend-gpu", "0"},
              {"gvirtus.io/assigned-by", "gvirtus-webhook-1"},
              {"gvirtus.io/properties", "{}"}}},
            {"managedFields", json::array({{{"manager", "kubectl"}}})}}},
          {"spec", {{"containers", json::array({{{"name", "app"}, {"image", "example/app"}}})}}},
          {"status",
           {{"phase", "Running"},
            {"podIP", "10.1.0.5"},
            {"podIPs", json::array({{{"ip", "10.1.0.5"}}})},
            {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

std::vector<json> variedPods() {
  json gated = assigned("gated");
  gated["metadata"]["annotations"] = {{"gvirtus.io/gpu-memory", "8Gi"}};
  gated["spec"]["schedulingGates"] =
      json::array({{{"name", "example.com/other"}}, {{"name", "gvirtus.io/backend"}}});
  gated["status"] = {{"phase", "Pending"}};
  json owned = assigned("owned");
  owned["metadata"]["ownerReferences"] = json::array({{{"apiVersion", "apps/v1"},
                                                       {"kind", "ReplicaSet"},
                                                       {"name", "infer-7d9"},
                                                       {"uid", "u-1"},
                                                       {"controller", true}}});
  owned["status"]["conditions"].push_back(
      {{"type", "gvirtus.io/BackendLost"}, {"status", "True"}, {"reason", "BackendGone"}});
  json gang = assigned("gang");
  gang["metadata"]["annotations"]["pod-group-name"] = "pg-1";
  gang["metadata"]["annotations"]["gpu-fraction"] = "0.5";
  gang["metadata"]["annotations"]["gpu-memory"] = "4096";
  json deleting = assigned("deleting");
  deleting["metadata"]["deletionTimestamp"] = "2026-11-27T10:05:00Z";
  deleting["status"]["phase"] = "Succeeded";
  json dual = assigned("dual");  // IPv6 first: podIPs is kept
  dual["status"]["podIP"] = "fd00::5";
  dual["status"]["podIPs"] = json::array({{{"ip", "fd00::5"}}, {{"ip", "10.1.0.6"}}});
  json bare = {{"metadata", {{"name", "bare"}, {"namespace", "team-b"}}}};
  return {assigned("running"), gated, owned, gang, deleting, dual, bare};
}

TEST_CASE("a GvirtusPod's document is what frontendFields keeps", "[gvirtus-pod]") {
  for (const json& pod : variedPods()) {
    CAPTURE(pod["metadata"]["name"]);
    const json kept = frontendFields(pod);
    CHECK(GvirtusPod::from(kept).document() == kept);
  }
}

TEST_CASE("a GvirtusPod answers what its readers ask of it", "[gvirtus-pod]") {
  const auto pods = variedPods();
  const GvirtusPod running = GvirtusPod::from(frontendFields(pods[0]));
  CHECK(cacheKey(running.ns, running.name) == "team-a/running");
  REQUIRE(running.annotation("gvirtus.io/backend-pod") != nullptr);
  CHECK(*running.annotation("gvirtus.io/backend-pod") == "gvirtus-system/be-1");
  CHECK(running.annotation("gvirtus.io/properties") == nullptr);  // not kept
  CHECK(running.annotationOr("pod-group-name", "none") == "none");
  CHECK_FALSE(running.gated);
  CHECK_FALSE(running.deleting());
  CHECK_FALSE(running.finished());

  const GvirtusPod gated = GvirtusPod::from(frontendFields(pods[1]));
  CHECK(gated.gated);
  CHECK(gated.annotationOr("gvirtus.io/gpu-memory") == "8Gi");

  const GvirtusPod deleting = GvirtusPod::from(frontendFields(pods[4]));
  CHECK(deleting.deleting());
  CHECK(deleting.finished());

  // Values of a type the API server never sends are left out, not thrown on.
  json odd = pods[0];
  odd["metadata"]["annotations"]["gvirtus.io/backend-gpu"] = 0;
  odd["metadata"]["uid"] = 7;
  const GvirtusPod read = GvirtusPod::from(frontendFields(odd));
  CHECK(read.annotation("gvirtus.io/backend-gpu") == nullptr);
  CHECK(read.uid.empty());
}

TEST_CASE("records of one pool share the annotation values they hold the same", "[gvirtus-pod]") {
  StringPool pool;
  const GvirtusPod a = GvirtusPod::from(frontendFields(assigned("a")), &pool);
  const GvirtusPod b = GvirtusPod::from(frontendFields(assigned("b")), &pool);
  REQUIRE(a.annotation("gvirtus.io/backend-pod") != nullptr);
  CHECK(a.annotation("gvirtus.io/backend-pod") == b.annotation("gvirtus.io/backend-pod"));
  CHECK(*b.annotation("gvirtus.io/backend-pod") == "gvirtus-system/be-1");
  CHECK(GvirtusPod::from(frontendFields(assigned("a")), &pool).document() ==
        frontendFields(assigned("a")));

  // A value no record holds any more goes from the pool once it sweeps.
  for (int i = 0; i < 3000; ++i) {
    json pod = assigned("p" + std::to_string(i));
    pod["metadata"]["annotations"]["gvirtus.io/backend"] = "10.0.0." + std::to_string(i);
    (void)GvirtusPod::from(frontendFields(pod), &pool);
  }
  CHECK(pool.size() < 2000);
  CHECK(a.annotationOr("gvirtus.io/backend") == "10.0.0.1:9999");  // still held: kept

  // A long value is its own, not pooled.
  json wordy = assigned("wordy");
  wordy["metadata"]["annotations"]["pod-group-name"] = std::string(StringPool::kLongest + 1, 'g');
  const size_t pooled = pool.size();
  const GvirtusPod long1 = GvirtusPod::from(frontendFields(wordy), &pool);
  const GvirtusPod long2 = GvirtusPod::from(frontendFields(wordy), &pool);
  CHECK(long1.annotation("pod-group-name") != long2.annotation("pod-group-name"));
  CHECK(long1.document() == frontendFields(wordy));
  CHECK(pool.size() <= pooled + 1);
}

// A source that hands its handlers exactly what the test says, as a ResourceCache without
// holdObjects would: `old` and a relist's deletion as the name alone.
class HandSource final : public ObjectCache {
 public:
  void addHandlers(ResourceEventHandlers handlers) override { handlers_.push_back(handlers); }
  void start() override { started = true; }
  bool hasSynced() const override { return started; }
  ObjectSnapshot get(const std::string&, const std::string&) const override { return nullptr; }
  std::vector<ObjectSnapshot> list() const override { return {}; }

  void add(const json& pod) {
    for (const auto& h : handlers_) {
      h.onAdd(pod);
    }
  }
  void update(const json& old, const json& now) {
    for (const auto& h : handlers_) {
      h.onUpdate(old, now);
    }
  }
  void remove(const json& last) {
    for (const auto& h : handlers_) {
      h.onDelete(last);
    }
  }

  bool started = false;

 private:
  std::vector<ResourceEventHandlers> handlers_;
};

// What a handler added to the store was handed: "add NAME", "update NAME OLD->NEW" (the
// backend-pod annotation of each), "delete NAME UID".
struct Seen {
  std::vector<std::string> lines;
  ResourceEventHandlers handlers() {
    auto backend = [](const json& pod) {
      return pod["metadata"]
          .value("annotations", json::object())
          .value("gvirtus.io/backend-pod", "-");
    };
    return {[this](const json& pod) { lines.push_back("add " + cacheKey(pod)); },
            [this, backend](const json& old, const json& now) {
              lines.push_back("update " + cacheKey(now) + " " + backend(old) + "->" + backend(now));
            },
            [this](const json& pod) {
              lines.push_back("delete " + cacheKey(pod) + " " + pod["metadata"].value("uid", "-"));
            }};
  }
};

TEST_CASE("the GVirtuS pod store keeps records and hands documents to its readers",
          "[gvirtus-pod]") {
  HandSource source;
  GvirtusPodStore store(source);
  Seen seen;
  store.addHandlers(seen.handlers());
  store.start();
  CHECK(source.started);
  CHECK(store.hasSynced());

  source.add(frontendFields(assigned("a")));
  source.add(frontendFields(assigned("b")));
  CHECK(store.size() == 2);
  REQUIRE(store.record("team-a", "a") != nullptr);
  CHECK(store.record("team-a", "a")->podIP == "10.1.0.5");
  CHECK(*store.get("team-a", "a") == frontendFields(assigned("a")));
  CHECK(store.records().size() == 2);
  CHECK(store.list().size() == 2);
  CHECK_FALSE(store.get("team-a", "missing"));

  // A source without holdObjects hands out only the name as `old` and as what a relist found
  // gone: the store's readers get the record's document instead.
  json moved = frontendFields(assigned("a"));
  moved["metadata"]["annotations"]["gvirtus.io/backend-pod"] = "gvirtus-system/be-2";
  const json nameOnly = {{"metadata", {{"namespace", "team-a"}, {"name", "a"}}}};
  source.update(nameOnly, moved);
  source.remove(nameOnly);
  json finalState = frontendFields(assigned("b"));  // from a watched delete
  finalState["metadata"]["uid"] = "final";
  source.remove(finalState);
  CHECK(seen.lines ==
        std::vector<std::string>{"add team-a/a", "add team-a/b",
                                 "update team-a/a gvirtus-system/be-1->gvirtus-system/be-2",
                                 "delete team-a/a 0f7b7c1e-5c1a-4f7e-9b9a-3f2f7a6f1c2d",
                                 "delete team-a/b final"});
  CHECK(store.size() == 0);
}

}  // namespace
}  // namespace gvirtus::webhook
