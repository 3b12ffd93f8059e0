// ResourceCache against the real kube-apiserver: paged initial list, following changes,
// and surviving a restart of kube-apiserver (which also makes its resumed watch too old:
// 410 Gone, then a relist that must converge on the server's state).
#include <map>

#include "common/cache/resource_cache.h"
#include "integration/fixtures.h"
#include "support/child_process.h"

namespace gvirtus::integration {
namespace {

// What the handlers saw, as "add NAME", "update NAME", "delete NAME".
class Recorder {
 public:
  ResourceEventHandlers handlers() {
    return {[this](const json& o) { push("add " + name(o)); },
            [this](const json&, const json& now) { push("update " + name(now)); },
            [this](const json& o) { push("delete " + name(o)); }};
  }
  bool saw(const std::string& line) {
    std::lock_guard lock(mutex_);
    return std::find(seen_.begin(), seen_.end(), line) != seen_.end();
  }
  size_t count(const std::string& prefix) {
    std::lock_guard lock(mutex_);
    return static_cast<size_t>(std::count_if(
        seen_.begin(), seen_.end(), [&](const auto& s) { return s.rfind(prefix, 0) == 0; }));
  }
  std::string dump() {
    std::lock_guard lock(mutex_);
    std::string out;
    for (const auto& s : seen_) {
      out += s + "\n";
    }
    return out;
  }

 private:
  static std::string name(const json& o) { return o["metadata"].value("name", ""); }
  void push(std::string line) {
    std::lock_guard lock(mutex_);
    seen_.push_back(std::move(line));
  }
  std::mutex mutex_;
  std::vector<std::string> seen_;
};

// name -> resourceVersion
using Versions = std::map<std::string, std::string>;

const json& objectOf(const json& object) {
  return object;
}
const json& objectOf(const ObjectSnapshot& object) {
  return *object;
}

// name -> resourceVersion of listed objects or of a cache's snapshots.
template <typename Object>
Versions versionsOf(const std::vector<Object>& objects) {
  Versions out;
  for (const auto& o : objects) {
    out[objectOf(o)["metadata"]["name"].template get<std::string>()] =
        resourceVersionOf(objectOf(o));
  }
  return out;
}

Versions serverVersions(KubeClient& client, const std::string& ns, const std::string& selector) {
  ListOptions options;
  options.labelSelector = selector;
  auto listed = client.listAll(resources::kConfigMaps, ns, options);
  if (!listed) {
    return {{"<error>", listed.error().message}};
  }
  return versionsOf(listed->items);
}

// Retries a write while the API server comes back.
template <typename Write>
void retryWrite(const char* what, Write write) {
  std::string last;
  const bool ok = eventually(
      [&] {
        auto result = write();
        if (!result) {
          last = result.error().message;
        }
        return result.has_value();
      },
      60s);
  INFO(what << ": " << last);
  REQUIRE(ok);
}

TEST_CASE("the cache lists in pages and follows the real API server", "[integration][cache]") {
  auto client = adminClient();
  TestNamespace ns(*client, "it-cache");
  const json labels = {{"gvirtus.io/test-set", "cache"}};
  createConfigMaps(*client, ns.name(), "c-", 120, labels);
  ResourceCacheOptions options;
  options.pageSize = 50;
  ResourceCache cache(*client, resources::kConfigMaps, ns.name(), "gvirtus.io/test-set=cache", "",
                      options);
  Recorder recorder;
  cache.addHandlers(recorder.handlers());
  const auto began = std::chrono::steady_clock::now();
  cache.start();
  REQUIRE(cache.waitForSync(30s));
  WARN("initial list of 120 in pages of 50 synced in "
       << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                began)
              .count()
       << " ms");
  CHECK(cache.size() == 120);
  CHECK(recorder.count("add ") == 120);
  CHECK(cache.get(ns.name(), "c-007") != nullptr);
  CHECK_FALSE(cache.get(ns.name(), "kube-root-ca.crt") != nullptr);  // the selector holds

  REQUIRE(client->patch(resources::kConfigMaps, ns.name(), "c-001", PatchType::Merge,
                        R"({"data":{"k":"v"}})"));
  REQUIRE(client->remove(resources::kConfigMaps, ns.name(), "c-002"));
  REQUIRE(
      client->create(resources::kConfigMaps, ns.name(), configMap(ns.name(), "c-new", {}, labels)));
  // Losing the label is a deletion for a cache with that selector.
  REQUIRE(client->patch(resources::kConfigMaps, ns.name(), "c-003", PatchType::Merge,
                        R"({"metadata":{"labels":{"gvirtus.io/test-set":null}}})"));
  REQUIRE(eventually([&] {
    return recorder.saw("update c-001") && recorder.saw("delete c-002") &&
           recorder.saw("add c-new") && recorder.saw("delete c-003");
  }));
  CHECK((*cache.get(ns.name(), "c-001"))["data"]["k"] == "v");
  REQUIRE(eventually([&] {
    return versionsOf(cache.list()) ==
           serverVersions(*client, ns.name(), "gvirtus.io/test-set=cache");
  }));
  CHECK(cache.relistCount() == 0);
}

TEST_CASE("the cache survives a kube-apiserver restart and converges after 410",
          "[integration][cache][restart]") {
  // The restart script needs the cluster's name and kwokctl's folder.
  const std::string cluster = testing::clusterName();
  const std::string source = testing::sourceDir();
  (void)testing::requireEnv("KWOK_WORKDIR");
  auto client = impatientClient(5s);
  TestNamespace ns(*client, "it-restart");
  const json labels = {{"gvirtus.io/test-set", "restart"}};
  const std::string selector = "gvirtus.io/test-set=restart";
  for (const char* name : {"keep", "change", "remove", "seen-before"}) {
    REQUIRE(client->create(resources::kConfigMaps, ns.name(),
                           configMap(ns.name(), name, {{"v", "1"}}, labels)));
  }

  auto cacheClient = impatientClient(5s);
  // A long backoff keeps the cache away for about 10s after the watch breaks: the
  // restart takes 3-5s, so the changes below are made while the cache is disconnected and
  // reach it through the relist's diff, not through a watch.
  ResourceCacheOptions options;
  options.backoffInitial = 12s;
  options.backoffMax = 12s;
  ResourceCache cache(*cacheClient, resources::kConfigMaps, ns.name(), selector, "", options);
  Recorder recorder;
  cache.addHandlers(recorder.handlers());
  cache.start();
  REQUIRE(cache.waitForSync(30s));
  REQUIRE(cache.size() == 4);

  // A change the cache sees by its watch before the restart.
  REQUIRE(client->patch(resources::kConfigMaps, ns.name(), "seen-before", PatchType::Merge,
                        R"({"data":{"v":"2"}})"));
  REQUIRE(eventually([&] { return recorder.saw("update seen-before"); }));
  // A write the cache's watch does not match moves etcd's revision past the cache's last
  // version; the restarted server's watch cache starts at the revision it lists, so the
  // cache's resumed watch is then too old (410) and it must relist.
  REQUIRE(
      client->create(resources::kConfigMaps, ns.name(), configMap(ns.name(), "unlabelled", {})));

  const auto began = std::chrono::steady_clock::now();
  auto [code, output] = testing::runCommand(
      {"/bin/bash", source + "/tests/cluster/restart-apiserver.sh", cluster}, {}, 180s);
  INFO("restart-apiserver.sh:\n" << output);
  REQUIRE(code == 0);
  const auto restarted = std::chrono::steady_clock::now();

  // Changes made as soon as the server is back, while the cache is still backing off.
  const int64_t relistsBefore = cache.relistCount();
  retryWrite("create new", [&] {
    return client->create(resources::kConfigMaps, ns.name(),
                          configMap(ns.name(), "new", {{"v", "1"}}, labels));
  });
  retryWrite("update change", [&] {
    return client->patch(resources::kConfigMaps, ns.name(), "change", PatchType::Merge,
                         R"({"data":{"v":"2"}})");
  });
  retryWrite("delete remove",
             [&] { return client->remove(resources::kConfigMaps, ns.name(), "remove"); });

  const bool converged = eventually(
      [&] { return versionsOf(cache.list()) == serverVersions(*client, ns.name(), selector); },
      60s);
  INFO("handlers saw:\n" << recorder.dump());
  REQUIRE(converged);
  const auto convergedAt = std::chrono::steady_clock::now();
  WARN("apiserver restart took "
       << std::chrono::duration_cast<std::chrono::milliseconds>(restarted - began).count()
       << " ms; the cache converged "
       << std::chrono::duration_cast<std::chrono::milliseconds>(convergedAt - restarted).count()
       << " ms after it was ready; relists: " << cache.relistCount());
  CHECK(recorder.saw("add new"));
  CHECK(recorder.saw("update change"));
  CHECK(recorder.saw("delete remove"));
  CHECK((*cache.get(ns.name(), "change"))["data"]["v"] == "2");
  CHECK(cache.get(ns.name(), "keep") != nullptr);
  CHECK_FALSE(cache.get(ns.name(), "remove") != nullptr);
  CHECK(relistsBefore == 0);
  CHECK(cache.relistCount() >= 1);
  // Nothing was reported twice or out of thin air: one add per object ever added.
  CHECK(recorder.count("add ") == 5);

  // And it keeps watching.
  REQUIRE(client->patch(resources::kConfigMaps, ns.name(), "keep", PatchType::Merge,
                        R"({"data":{"v":"3"}})"));
  REQUIRE(eventually([&] { return recorder.saw("update keep"); }));
}

}  // namespace
}  // namespace gvirtus::integration
