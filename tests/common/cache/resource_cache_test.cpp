// Unit tests of ResourceCache: the relist diff as pure logic, and the list/watch loop
// against a tiny loopback fake of the API paths it uses (support/fake_api_server.h). The
// real kube-apiserver (paging, 410 after a restart, bookmarks) is exercised by the
// integration tests in tests/integration/.
#include "common/cache/resource_cache.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/kube/client.h"
#include "support/cluster_env.h"
#include "support/fake_api_server.h"
#include "support/manual_clock.h"

namespace gvirtus {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using gvirtus::testing::eventually;

json object(const std::string& ns, const std::string& name, const std::string& version,
            const json& data = json::object()) {
  json o = {{"metadata", {{"name", name}, {"resourceVersion", version}}}, {"data", data}};
  if (!ns.empty()) {
    o["metadata"]["namespace"] = ns;
  }
  return o;
}

// What the handlers saw, as "add ns/name", "update ns/name v1->v2", "delete ns/name".
class Recorder {
 public:
  ResourceEventHandlers handlers() {
    return {[this](const json& o) { push("add " + cacheKey(o)); },
            [this](const json& old, const json& now) {
              push("update " + cacheKey(now) + " " +
                   old["metadata"]["resourceVersion"].get<std::string>() + "->" +
                   now["metadata"]["resourceVersion"].get<std::string>());
            },
            [this](const json& o) { push("delete " + cacheKey(o)); }};
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(seen_, {});
  }
  size_t size() {
    std::lock_guard lock(mutex_);
    return seen_.size();
  }

 private:
  void push(std::string line) {
    std::lock_guard lock(mutex_);
    seen_.push_back(std::move(line));
  }
  std::mutex mutex_;
  std::vector<std::string> seen_;
};

std::unique_ptr<KubeClient> clientFor(const testing::FakeApiServer& server) {
  KubeClientOptions options;
  options.qps = 1000;
  options.burst = 1000;
  options.maxRetries = 0;
  options.requestTimeout = 5s;
  auto client = KubeClient::create(server.kubeConfig(), options);
  REQUIRE(client);
  return std::move(*client);
}

ResourceCacheOptions fastOptions() {
  ResourceCacheOptions options;
  options.pageSize = 2;
  options.backoffInitial = 20ms;
  options.backoffMax = 100ms;
  return options;
}

TEST_CASE("cacheKey is namespace/name or name when cluster-scoped", "[resource_cache]") {
  CHECK(cacheKey(object("ns1", "a", "1")) == "ns1/a");
  CHECK(cacheKey(object("", "node-1", "1")) == "node-1");
  CHECK(cacheKey("ns1", "a") == "ns1/a");
  CHECK(cacheKey("", "a") == "a");
  CHECK(cacheKey(json::object()).empty());
}

using Store = std::map<std::string, ObjectSnapshot>;

ObjectSnapshot snapshot(json object) {
  return std::make_shared<const json>(std::move(object));
}

TEST_CASE("diffStores reports exactly what a relist changed", "[resource_cache]") {
  Store before = {{"ns/a", snapshot(object("ns", "a", "1"))},
                  {"ns/b", snapshot(object("ns", "b", "2"))},
                  {"ns/c", snapshot(object("ns", "c", "3"))}};
  Store after = {{"ns/a", snapshot(object("ns", "a", "1"))},
                 {"ns/b", snapshot(object("ns", "b", "7"))},
                 {"ns/d", snapshot(object("ns", "d", "8"))}};
  const auto deltas = diffStores(before, after);
  REQUIRE(deltas.size() == 3);
  CHECK(deltas[0].type == StoreDelta::Type::Added);
  CHECK(deltas[0].key == "ns/d");
  CHECK(deltas[0].old == nullptr);
  CHECK(deltas[1].type == StoreDelta::Type::Updated);
  CHECK(deltas[1].key == "ns/b");
  CHECK((*deltas[1].old)["metadata"]["resourceVersion"] == "2");
  CHECK((*deltas[1].now)["metadata"]["resourceVersion"] == "7");
  CHECK(deltas[2].type == StoreDelta::Type::Deleted);
  CHECK(deltas[2].key == "ns/c");
  CHECK((*deltas[2].now)["metadata"]["resourceVersion"] == "3");  // the last state held

  SECTION("no change, no delta") {
    CHECK(diffStores(after, after).empty());
  }
  SECTION("from empty: all adds, sorted") {
    const auto all = diffStores(Store{}, after);
    REQUIRE(all.size() == 3);
    CHECK(all[0].key == "ns/a");
    CHECK(all[2].key == "ns/d");
    for (const auto& d : all) {
      CHECK(d.type == StoreDelta::Type::Added);
    }
  }
  SECTION("to empty: all deletes") {
    const auto all = diffStores(before, Store{});
    REQUIRE(all.size() == 3);
    for (const auto& d : all) {
      CHECK(d.type == StoreDelta::Type::Deleted);
    }
  }
  SECTION("without resourceVersions the content decides") {
    auto x = snapshot({{"metadata", {{"name", "x"}}}, {"data", {{"k", "1"}}}});
    auto y = snapshot({{"metadata", {{"name", "x"}}}, {"data", {{"k", "2"}}}});
    CHECK(diffStores(Store{{"x", x}}, Store{{"x", x}}).empty());
    CHECK(diffStores(Store{{"x", x}}, Store{{"x", y}}).size() == 1);
  }
}

TEST_CASE("the cache lists in pages then syncs and serves reads", "[resource_cache]") {
  testing::FakeApiServer server;
  for (int i = 0; i < 5; ++i) {
    server.putConfigMap("ns1", "cm" + std::to_string(i), {{"i", std::to_string(i)}});
  }
  auto client = clientFor(server);
  ResourceCache cache(*client, resources::kConfigMaps, "", "", "", fastOptions());
  Recorder recorder;
  std::atomic<bool> sawItselfInHandler = false;
  cache.addHandlers(recorder.handlers());
  // A handler may read the cache: handlers run outside the store lock.
  cache.addHandlers({[&](const json& o) {
                       if (cache.get("ns1", o["metadata"]["name"].get<std::string>())) {
                         sawItselfInHandler = true;
                       }
                     },
                     {},
                     {}});
  CHECK_FALSE(cache.hasSynced());
  cache.start();
  REQUIRE(cache.waitForSync(5s));
  CHECK(cache.hasSynced());
  CHECK(cache.size() == 5);
  CHECK(cache.keys() ==
        std::vector<std::string>{"ns1/cm0", "ns1/cm1", "ns1/cm2", "ns1/cm3", "ns1/cm4"});
  CHECK(cache.list().size() == 5);
  auto cm3 = cache.get("ns1", "cm3");
  REQUIRE(cm3);
  CHECK((*cm3)["data"]["i"] == "3");
  CHECK_FALSE(cache.get("ns1", "missing"));
  CHECK_FALSE(cache.get("ns2", "cm3"));
  CHECK(cache.getByKey("ns1/cm0"));
  CHECK(recorder.take().size() == 5);
  CHECK(sawItselfInHandler);
  // 5 objects, pages of 2: three list requests, each with limit=2.
  CHECK(server.listLimits() == std::vector<int64_t>{2, 2, 2});
  CHECK(cache.relistCount() == 0);
  CHECK(cache.resourceVersion() == std::to_string(server.resourceVersion()));
}

TEST_CASE("the cache follows adds updates and deletes in order", "[resource_cache]") {
  testing::FakeApiServer server;
  server.putConfigMap("ns1", "a", {{"v", "1"}});
  auto client = clientFor(server);
  ResourceCache cache(*client, resources::kConfigMaps, "", "", "", fastOptions());
  Recorder recorder;
  cache.addHandlers(recorder.handlers());
  cache.start();
  REQUIRE(cache.waitForSync(5s));
  CHECK(recorder.take() == std::vector<std::string>{"add ns1/a"});
  REQUIRE(eventually([&] { return server.openWatches() == 1; }));

  server.putConfigMap("ns2", "b", {{"v", "1"}});
  const auto a2 = server.putConfigMap("ns1", "a", {{"v", "2"}});
  server.deleteConfigMap("ns2", "b");
  REQUIRE(eventually([&] { return recorder.size() == 3; }));
  const std::string va = "101";
  CHECK(recorder.take() ==
        std::vector<std::string>{
            "add ns2/b",
            "update ns1/a " + va + "->" + a2["metadata"]["resourceVersion"].get<std::string>(),
            "delete ns2/b"});
  CHECK((*cache.get("ns1", "a"))["data"]["v"] == "2");
  CHECK_FALSE(cache.get("ns2", "b"));
  CHECK(cache.resourceVersion() == std::to_string(server.resourceVersion()));
}

TEST_CASE("a transform keeps only what the cache's reader needs", "[resource_cache]") {
  testing::FakeApiServer server;
  server.putConfigMap("ns1", "a", {{"keep", "1"}, {"drop", std::string(4096, 'x')}});
  auto client = clientFor(server);
  ResourceCacheOptions options = fastOptions();
  options.transform = [](json o) {
    o["data"].erase("drop");
    return o;
  };
  ResourceCache cache(*client, resources::kConfigMaps, "", "", "", options);
  Recorder recorder;
  cache.addHandlers(recorder.handlers());
  cache.start();
  REQUIRE(cache.waitForSync(5s));
  CHECK((*cache.get("ns1", "a"))["data"] == json{{"keep", "1"}});  // listed
  REQUIRE(eventually([&] { return server.openWatches() == 1; }));
  recorder.take();
  server.putConfigMap("ns1", "a", {{"keep", "2"}, {"drop", "y"}});
  REQUIRE(eventually([&] { return recorder.size() == 1; }));
  CHECK((*cache.get("ns1", "a"))["data"] == json{{"keep", "2"}});  // watched
}

TEST_CASE("keep holds only the objects asked for, and lets go of one no longer kept",
          "[resource_cache]") {
  testing::FakeApiServer server;
  server.putConfigMap("ns1", "a", {{"want", "yes"}});
  server.putConfigMap("ns1", "b", {{"want", "no"}});
  auto client = clientFor(server);
  ResourceCacheOptions options = fastOptions();
  options.keep = [](const json& o) { return o["data"].value("want", "") == "yes"; };
  ResourceCache cache(*client, resources::kConfigMaps, "", "", "", options);
  Recorder recorder;
  cache.addHandlers(recorder.handlers());
  cache.start();
  REQUIRE(cache.waitForSync(5s));
  CHECK(recorder.take() == std::vector<std::string>{"add ns1/a"});
  CHECK(cache.size() == 1);
  REQUIRE(eventually([&] { return server.openWatches() == 1; }));
  server.putConfigMap("ns1", "b", {{"want", "yes"}});  // now kept: added
  REQUIRE(eventually([&] { return recorder.size() == 1; }));
  CHECK(recorder.take() == std::vector<std::string>{"add ns1/b"});
  server.putConfigMap("ns1", "a", {{"want", "no"}});  // no longer kept: gone
  REQUIRE(eventually([&] { return recorder.size() == 1; }));
  CHECK(recorder.take() == std::vector<std::string>{"delete ns1/a"});
  CHECK_FALSE(cache.get("ns1", "a"));
  server.putConfigMap("ns1", "c", {{"want", "no"}});  // never kept: nothing at all
  server.putConfigMap("ns1", "b", {{"want", "yes"}, {"v", "2"}});
  REQUIRE(eventually([&] { return recorder.size() == 1; }));
  CHECK(recorder.take().at(0).starts_with("update ns1/b"));
  CHECK(cache.size() == 1);
  server.deleteConfigMap("ns1", "c");  // never held: nothing
  server.deleteConfigMap("ns1", "b");
  REQUIRE(eventually([&] { return recorder.size() == 1; }));
  CHECK(recorder.take() == std::vector<std::string>{"delete ns1/b"});
  CHECK(cache.size() == 0);
}

TEST_CASE("bookmarks only advance the resourceVersion", "[resource_cache]") {
  testing::FakeApiServer server;
  server.putConfigMap("ns1", "a", {});
  auto client = clientFor(server);
  ResourceCache cache(*client, resources::kConfigMaps, "", "", "", fastOptions());
  Recorder recorder;
  cache.addHandlers(recorder.handlers());
  cache.start();
  REQUIRE(cache.waitForSync(5s));
  recorder.take();
  REQUIRE(eventually([&] { return server.openWatches() == 1; }));
  const int64_t version = server.bookmark();
  REQUIRE(eventually([&] { return cache.resourceVersion() == std::to_string(version); }));
  CHECK(recorder.size() == 0);
  CHECK(cache.size() == 1);
}

TEST_CASE("a watch that ends normally is resumed from the last version without a relist",
          "[resource_cache]") {
  testing::FakeApiServer server;
  server.putConfigMap("ns1", "a", {});
  auto client = clientFor(server);
  ResourceCache cache(*client, resources::kConfigMaps, "", "", "", fastOptions());
  Recorder recorder;
  cache.addHandlers(recorder.handlers());
  cache.start();
  REQUIRE(cache.waitForSync(5s));
  recorder.take();
  for (int round = 0; round < 3; ++round) {
    REQUIRE(eventually([&] { return server.openWatches() == 1; }));
    server.putConfigMap("ns1", "r" + std::to_string(round), {});
    REQUIRE(eventually([&] { return recorder.size() == 1; }));
    recorder.take();
    server.endWatches();
  }
  REQUIRE(eventually([&] { return server.watches() >= 4; }));
  CHECK(server.lists() == 1);
  CHECK(cache.relistCount() == 0);
  CHECK(cache.size() == 4);
}

TEST_CASE("after 410 Gone the cache relists and handlers see what changed meanwhile",
          "[resource_cache]") {
  testing::FakeApiServer server;
  server.putConfigMap("ns1", "keep", {{"v", "1"}});
  server.putConfigMap("ns1", "change", {{"v", "1"}});
  server.putConfigMap("ns1", "remove", {{"v", "1"}});
  auto client = clientFor(server);
  ResourceCache cache(*client, resources::kConfigMaps, "", "", "", fastOptions());
  Recorder recorder;
  cache.addHandlers(recorder.handlers());
  cache.start();
  REQUIRE(cache.waitForSync(5s));
  recorder.take();
  REQUIRE(eventually([&] { return server.openWatches() == 1; }));
  const std::string changeVersion = (*cache.get("ns1", "change"))["metadata"]["resourceVersion"];

  // Disconnected: the changes are made and the history is compacted away, so the resumed
  // watch is too old.
  server.failWatches(true);
  server.putConfigMap("ns1", "new", {{"v", "1"}});
  const auto changed = server.putConfigMap("ns1", "change", {{"v", "2"}});
  server.deleteConfigMap("ns1", "remove");
  server.compact();
  server.failWatches(false);

  REQUIRE(eventually([&] { return cache.relistCount() == 1 && recorder.size() == 3; }));
  CHECK(recorder.take() ==
        std::vector<std::string>{"add ns1/new",
                                 "update ns1/change " + changeVersion + "->" +
                                     changed["metadata"]["resourceVersion"].get<std::string>(),
                                 "delete ns1/remove"});
  CHECK(cache.keys() == std::vector<std::string>{"ns1/change", "ns1/keep", "ns1/new"});
  CHECK((*cache.get("ns1", "change"))["data"]["v"] == "2");

  // And it watches again from the relist.
  REQUIRE(eventually([&] { return server.openWatches() == 1; }));
  server.putConfigMap("ns1", "after", {});
  REQUIRE(eventually([&] { return recorder.size() == 1; }));
  CHECK(recorder.take() == std::vector<std::string>{"add ns1/after"});
}

TEST_CASE("without holdObjects the store keeps versions and handlers get the objects",
          "[resource_cache]") {
  testing::FakeApiServer server;
  for (const char* name : {"keep", "change", "remove", "fourth", "fifth"}) {
    server.putConfigMap("ns1", name, {{"v", "1"}});
  }
  auto client = clientFor(server);
  ResourceCacheOptions options = fastOptions();  // pages of 2: three pages
  options.holdObjects = false;
  ResourceCache cache(*client, resources::kConfigMaps, "", "", "", options);
  std::mutex mutex;
  std::vector<std::string> seen;
  auto push = [&](std::string line) {
    std::lock_guard lock(mutex);
    seen.push_back(std::move(line));
  };
  auto take = [&] {
    std::lock_guard lock(mutex);
    return std::exchange(seen, {});
  };
  // What each handler is handed: the object's data where it has it, "-" for a name alone.
  auto data = [](const json& o) {
    return o.contains("data") ? o["data"].value("v", "?") : std::string("-");
  };
  cache.addHandlers({[&](const json& o) { push("add " + cacheKey(o) + " " + data(o)); },
                     [&](const json& old, const json& now) {
                       push("update " + cacheKey(now) + " " + data(old) + "->" + data(now));
                     },
                     [&](const json& o) { push("delete " + cacheKey(o) + " " + data(o)); }});
  cache.start();
  REQUIRE(cache.waitForSync(5s));
  CHECK(take().size() == 5);
  CHECK(cache.size() == 5);
  CHECK_FALSE(cache.get("ns1", "keep"));  // it hands out nothing
  CHECK(cache.list().empty());
  REQUIRE(eventually([&] { return server.openWatches() == 1; }));

  server.putConfigMap("ns1", "change", {{"v", "2"}});
  REQUIRE(eventually([&] { return take() == std::vector<std::string>{"update ns1/change -->2"}; }));

  // A relist tells what changed meanwhile, against the versions kept: an unchanged object
  // is no update.
  server.failWatches(true);
  server.putConfigMap("ns1", "new", {{"v", "1"}});
  server.putConfigMap("ns1", "change", {{"v", "3"}});
  server.deleteConfigMap("ns1", "remove");
  server.compact();
  server.failWatches(false);
  REQUIRE(eventually([&] { return cache.relistCount() == 1; }));
  std::vector<std::string> relisted;
  REQUIRE(eventually([&] {
    for (auto& line : take()) {
      relisted.push_back(std::move(line));
    }
    return relisted.size() >= 3;
  }));
  std::ranges::sort(relisted);
  CHECK(relisted ==
        std::vector<std::string>{"add ns1/new 1", "delete ns1/remove -", "update ns1/change -->3"});
  CHECK(cache.keys() ==
        std::vector<std::string>{"ns1/change", "ns1/fifth", "ns1/fourth", "ns1/keep", "ns1/new"});

  // A watched delete hands the final object.
  REQUIRE(eventually([&] { return server.openWatches() == 1; }));
  server.deleteConfigMap("ns1", "keep");
  REQUIRE(eventually([&] { return take() == std::vector<std::string>{"delete ns1/keep 1"}; }));
  CHECK(cache.size() == 4);
}

TEST_CASE("without holdObjects a list that fails partway keeps what it told the handlers",
          "[resource_cache]") {
  testing::FakeApiServer server;
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    server.putConfigMap("ns1", name, {{"v", "1"}});
  }
  server.failContinuedLists(true);  // the first page (a, b) comes, then the list fails
  auto client = clientFor(server);
  ResourceCacheOptions options = fastOptions();
  options.holdObjects = false;
  ResourceCache cache(*client, resources::kConfigMaps, "", "", "", options);
  Recorder recorder;
  cache.addHandlers(recorder.handlers());
  cache.start();
  REQUIRE(eventually([&] { return recorder.size() >= 2; }));
  // Told of a and b once; a goes while the list is retried.
  server.deleteConfigMap("ns1", "a");
  server.failContinuedLists(false);
  REQUIRE(cache.waitForSync(5s));
  // Said gone by the list that works, or, when its first page was read before the delete,
  // by the watch that follows it.
  REQUIRE(eventually([&] { return recorder.size() >= 6; }));
  CHECK(recorder.take() == std::vector<std::string>{"add ns1/a", "add ns1/b", "add ns1/c",
                                                    "add ns1/d", "add ns1/e", "delete ns1/a"});
  CHECK(cache.keys() == std::vector<std::string>{"ns1/b", "ns1/c", "ns1/d", "ns1/e"});
}

TEST_CASE("watch errors back off and resume without losing events", "[resource_cache]") {
  testing::FakeApiServer server;
  server.putConfigMap("ns1", "a", {});
  auto client = clientFor(server);
  testing::ManualClock clock;
  ResourceCacheOptions options = fastOptions();
  options.clock = &clock;
  ResourceCache cache(*client, resources::kConfigMaps, "", "", "", options);
  Recorder recorder;
  cache.addHandlers(recorder.handlers());
  cache.start();
  REQUIRE(cache.waitForSync(5s));
  recorder.take();
  REQUIRE(eventually([&] { return server.openWatches() == 1; }));

  server.failWatches(true);
  server.putConfigMap("ns1", "b", {});
  // One wait per failed attempt: 20ms doubling to 100ms, each +/- 20% jitter. The clock
  // moves only as far as each wait asked.
  const int before = server.watches();
  for (size_t i = 1; i <= 5; ++i) {
    REQUIRE(clock.waitForSleeps(i));
    clock.advance(clock.sleeps().back());
  }
  const std::vector<Duration> waits = clock.sleeps();
  const std::vector<std::pair<Duration, Duration>> expected = {
      {16ms, 24ms}, {32ms, 48ms}, {64ms, 96ms}, {80ms, 120ms}, {80ms, 120ms}};
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("wait " << i << ": " << waits[i].count() << "ms");
    CHECK(waits[i] >= expected[i].first);
    CHECK(waits[i] <= expected[i].second);
  }
  // Each wait followed one refused attempt (the first may have followed the watch that
  // failWatches ended): the sixth is waiting now, and nothing retried in between.
  REQUIRE(clock.waitForSleeps(6));
  CHECK(server.watches() - before >= 5);
  CHECK(server.watches() - before <= 6);
  server.failWatches(false);
  clock.advance(clock.sleeps().back());
  REQUIRE(eventually([&] { return recorder.size() == 1; }));
  CHECK(recorder.take() == std::vector<std::string>{"add ns1/b"});
  CHECK(cache.relistCount() == 0);  // the history was there: resumed, not relisted
  CHECK(server.lists() == 1);
}

TEST_CASE("stop() ends an open watch promptly", "[resource_cache]") {
  testing::FakeApiServer server;
  server.putConfigMap("ns1", "a", {});
  auto client = clientFor(server);
  ResourceCache cache(*client, resources::kConfigMaps, "", "", "", fastOptions());
  cache.start();
  REQUIRE(cache.waitForSync(5s));
  REQUIRE(eventually([&] { return server.openWatches() == 1; }));
  const auto began = std::chrono::steady_clock::now();
  cache.stop();
  CHECK(std::chrono::steady_clock::now() - began < 2s);
  CHECK(cache.size() == 1);  // the store keeps its contents
  cache.stop();              // idempotent
}

TEST_CASE("a kind the server does not serve is an empty synced store only when asked",
          "[resource_cache]") {
  testing::FakeApiServer server;  // serves ConfigMaps and Leases: a PodGroup list is a 404
  auto client = clientFor(server);
  const KubeResource podGroups{"scheduling.run.ai", "v2alpha2", "podgroups", true};
  ResourceCacheOptions options = fastOptions();
  options.absentMeansEmpty = true;
  ResourceCache emptyWhenAbsent(*client, podGroups, "", "", "", options);
  emptyWhenAbsent.start();
  REQUIRE(emptyWhenAbsent.waitForSync(5s));
  CHECK(emptyWhenAbsent.size() == 0);
  CHECK(emptyWhenAbsent.list().empty());
  CHECK(emptyWhenAbsent.absent());

  ResourceCache strict(*client, podGroups, "", "", "", fastOptions());
  strict.start();
  CHECK_FALSE(strict.waitForSync(300ms));
  CHECK_FALSE(strict.absent());
}

TEST_CASE("without a server the cache does not sync and keeps retrying", "[resource_cache]") {
  KubeConfig config;
  {
    testing::FakeApiServer gone;
    config = gone.kubeConfig();
  }
  KubeClientOptions clientOptions;
  clientOptions.maxRetries = 0;
  clientOptions.requestTimeout = 1s;
  auto client = KubeClient::create(config, clientOptions);
  REQUIRE(client);
  ResourceCache cache(**client, resources::kConfigMaps, "", "", "", fastOptions());
  cache.start();
  CHECK_FALSE(cache.waitForSync(300ms));
  CHECK_FALSE(cache.hasSynced());
  const auto began = std::chrono::steady_clock::now();
  cache.stop();
  CHECK(std::chrono::steady_clock::now() - began < 2s);
  CHECK_FALSE(cache.waitForSync(10ms));
}

}  // namespace
}  // namespace gvirtus

TEST_CASE("a store key splits into namespace and name", "[resource-cache]") {
  CHECK(gvirtus::splitCacheKey("team-a/web") ==
        std::pair<std::string, std::string>{"team-a", "web"});
  CHECK(gvirtus::splitCacheKey("node-1") == std::pair<std::string, std::string>{"", "node-1"});
  CHECK(gvirtus::splitCacheKey(gvirtus::cacheKey("ns", "a/b")).second == "a/b");
}
