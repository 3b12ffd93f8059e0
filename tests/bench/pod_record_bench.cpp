// Memory of the webhook's cache of every GVirtuS pod, without a cluster: 50,000 pods as the
// API server sends them once the webhook gave them a backend, held the way 6498ca6 held
// them (frontendFields() documents in a map, as the ResourceCache stored them) and the way
// the webhook holds them now (GvirtusPod records in a GvirtusPodStore). Bytes per pod from
// malloc's own count of what is in use (mallinfo2), the ratio of the two, and how long
// each takes to take in the 50,000. make bench-scale measures the whole webhook's resident
// memory; this says which part of it the records are.
//
//   build/tests/pod_record_bench   (BENCH_PODS, default 50000; BENCH_BACKENDS, default 200)

#include <malloc.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_env.h"
#include "bench/bench_output.h"
#include "common/cache/object_cache.h"
#include "webhook/pods/gvirtus_pod_store.h"
#include "webhook/pods/pod_fields.h"

using namespace gvirtus;
using namespace gvirtus::bench;
using gvirtus::webhook::frontendFields;
using gvirtus::webhook::GvirtusPodStore;
using nlohmann::json;

namespace {

// A pod of `make bench-scale` after its admission, as a list or a watch brings it.
json admittedPod(int i, int backends) {
  const int backend = i % backends;
  char uid[40];
  std::snprintf(uid, sizeof(uid), "0f7b7c1e-5c1a-4f7e-9b9a-%012d", i);
  return {{"metadata",
           {{"name", "run-" + std::to_string(i)},
            {"namespace", "bench-scale"},
            {"uid", uid},
            {"resourceVersion", std::to_string(100000 + i)},
            {"creationTimestamp", "2026-11-27T21:40:00Z"},
            {"labels", {{"gvirtus.io/enabled", "true"}, {"bench.gvirtus.io/run", "running"}}},
            {"annotations",
             {{"gvirtus.io/backend", "10.244." + std::to_string(backend / 250) + "." +
                                         std::to_string(backend % 250) + ":9999"},
              {"gvirtus.io/backend-pod", "gvirtus-system/backend-" + std::to_string(backend)},
              {"gvirtus.io/backend-gpu", "0"},
              {"gvirtus.io/assigned-by", "gvirtus-webhook-7d9f8c6b5-x2x9z"},
              {"gvirtus.io/properties", std::string(300, 'p')}}},
            {"managedFields", json::array({{{"manager", "kube-scheduler"}}})}}},
          {"spec", {{"nodeName", "fe-" + std::to_string(i % 1000)}}},
          {"status",
           {{"phase", "Running"},
            {"podIP", "10.0." + std::to_string(i / 250 % 250) + "." + std::to_string(i % 250)}}}};
}

// Hands every pod to its handlers once, as a cache's first list does, and holds nothing.
class ListOnce final : public ObjectCache {
 public:
  void addHandlers(ResourceEventHandlers handlers) override { handlers_.push_back(handlers); }
  void start() override {}
  bool hasSynced() const override { return true; }
  ObjectSnapshot get(const std::string&, const std::string&) const override { return nullptr; }
  std::vector<ObjectSnapshot> list() const override { return {}; }
  void add(const json& pod) {
    for (const auto& h : handlers_) {
      h.onAdd(pod);
    }
  }

 private:
  std::vector<ResourceEventHandlers> handlers_;
};

double inUse() {
  return static_cast<double>(mallinfo2().uordblks);
}

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

TEST_CASE("GVirtuS pods held as documents and as records", "[bench]") {
  const int pods = envInt("BENCH_PODS", 50000);
  const int backends = envInt("BENCH_BACKENDS", 200);

  // As 6498ca6's cache held them: the transformed document, shared, by "namespace/name".
  double before = inUse();
  auto start = std::chrono::steady_clock::now();
  auto documents = std::make_unique<std::map<std::string, ObjectSnapshot>>();
  for (int i = 0; i < pods; ++i) {
    json kept = frontendFields(admittedPod(i, backends));
    std::string key = cacheKey(kept);
    documents->emplace(std::move(key), std::make_shared<const json>(std::move(kept)));
  }
  const double documentSeconds = seconds(std::chrono::steady_clock::now() - start);
  const double documentBytes = (inUse() - before) / pods;
  REQUIRE(documents->size() == static_cast<size_t>(pods));
  documents.reset();

  // As the webhook holds them now.
  before = inUse();
  start = std::chrono::steady_clock::now();
  ListOnce source;
  auto store = std::make_unique<GvirtusPodStore>(source);
  for (int i = 0; i < pods; ++i) {
    source.add(frontendFields(admittedPod(i, backends)));
  }
  const double recordSeconds = seconds(std::chrono::steady_clock::now() - start);
  const double recordBytes = (inUse() - before) / pods;
  REQUIRE(store->size() == static_cast<size_t>(pods));
  CHECK(*store->get("bench-scale", "run-7") == frontendFields(admittedPod(7, backends)));

  const std::string page = format(
      "%d GVirtuS pods on %d backends, held in memory (malloc's bytes in use per pod):\n\n"
      "| | bytes per pod | time to take in all |\n|---|---|---|\n"
      "| documents (frontendFields, as the cache held them at 6498ca6) | %.0f | %.2f s |\n"
      "| records (GvirtusPod in a GvirtusPodStore) | %.0f | %.2f s |\n"
      "| records / documents | %.2f | %.2f |\n",
      pods, backends, documentBytes, documentSeconds, recordBytes, recordSeconds,
      recordBytes / documentBytes, recordSeconds / documentSeconds);
  std::printf("\n%s\n", page.c_str());
  append("6.md", page);
  summaryRow(
      format("memory per GVirtuS pod held by the webhook, records / documents (%d pods)", pods),
      format("%.2f (%.0f vs %.0f bytes)", recordBytes / documentBytes, recordBytes, documentBytes),
      "6");
  CHECK(recordBytes < documentBytes);
}
