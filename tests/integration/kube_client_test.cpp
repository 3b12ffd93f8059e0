// KubeClient against the real kube-apiserver of the local control plane: create, get,
// update, delete, paged list, every patch type, and watch.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <stop_token>
#include <thread>

#include "common/base/json_patch.h"
#include "integration/fixtures.h"

namespace gvirtus::integration {
namespace {

TEST_CASE("create get update and delete a ConfigMap", "[integration][client]") {
  auto client = adminClient();
  TestNamespace ns(*client, "it-client");

  auto created =
      client->create(resources::kConfigMaps, ns.name(), configMap(ns.name(), "cm", {{"k", "v"}}));
  REQUIRE(created);
  CHECK((*created)["metadata"]["uid"].is_string());
  CHECK_FALSE(resourceVersionOf(*created).empty());

  // get
  auto got = client->get(resources::kConfigMaps, ns.name(), "cm");
  REQUIRE(got);
  CHECK((*got)["data"]["k"] == "v");
  CHECK((*got)["kind"] == "ConfigMap");
  auto missing = client->get(resources::kConfigMaps, ns.name(), "nope");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().isNotFound());
  CHECK(missing.error().reason == "NotFound");

  // create twice: 409 AlreadyExists
  auto again =
      client->create(resources::kConfigMaps, ns.name(), configMap(ns.name(), "cm", {{"k", "x"}}));
  REQUIRE_FALSE(again);
  CHECK(again.error().isConflict());
  CHECK(again.error().reason == "AlreadyExists");

  // dry run: validated and answered, not stored
  WriteOptions dry;
  dry.dryRun = true;
  REQUIRE(client->create(resources::kConfigMaps, ns.name(), configMap(ns.name(), "dry", {}), dry));
  CHECK(client->get(resources::kConfigMaps, ns.name(), "dry").error().isNotFound());

  // update is a compare-and-swap on resourceVersion
  json first = *got;
  first["data"]["k"] = "one";
  auto updated = client->update(resources::kConfigMaps, ns.name(), "cm", first);
  REQUIRE(updated);
  CHECK((*updated)["data"]["k"] == "one");
  CHECK(resourceVersionOf(*updated) != resourceVersionOf(*got));
  json stale = *got;  // still carries the old resourceVersion
  stale["data"]["k"] = "stale";
  auto conflict = client->update(resources::kConfigMaps, ns.name(), "cm", stale);
  REQUIRE_FALSE(conflict);
  CHECK(conflict.error().isConflict());
  CHECK(conflict.error().reason == "Conflict");
  CHECK(client->get(resources::kConfigMaps, ns.name(), "cm").value()["data"]["k"] == "one");

  // delete
  REQUIRE(client->remove(resources::kConfigMaps, ns.name(), "cm"));
  auto gone = client->get(resources::kConfigMaps, ns.name(), "cm");
  REQUIRE_FALSE(gone);
  CHECK(gone.error().isNotFound());
  auto twice = client->remove(resources::kConfigMaps, ns.name(), "cm");
  REQUIRE_FALSE(twice);
  CHECK(twice.error().isNotFound());
}

TEST_CASE("list 120 ConfigMaps in pages of 50", "[integration][client]") {
  auto client = adminClient();
  TestNamespace ns(*client, "it-paging");
  const auto began = std::chrono::steady_clock::now();
  createConfigMaps(*client, ns.name(), "cm-", 120, {{"gvirtus.io/test-set", "paging"}});
  WARN("created 120 ConfigMaps in " << std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - began)
                                           .count()
                                    << " ms (4 writers)");

  ListOptions options;
  options.labelSelector = "gvirtus.io/test-set=paging";
  options.limit = 50;
  std::vector<size_t> sizes;
  std::set<std::string> names;
  std::vector<std::string> versions;
  do {
    auto page = client->list(resources::kConfigMaps, ns.name(), options);
    REQUIRE(page);
    versions.push_back(page->resourceVersion);
    sizes.push_back(page->items.size());
    for (const auto& item : page->items) {
      names.insert(item["metadata"]["name"].get<std::string>());
    }
    options.continueToken = page->continueToken;
  } while (!options.continueToken.empty());
  CHECK(sizes == std::vector<size_t>{50, 50, 20});
  CHECK(names.size() == 120);
  // One consistent snapshot: every page is served at the first page's version.
  CHECK(std::all_of(versions.begin(), versions.end(),
                    [&](const std::string& v) { return v == versions.front(); }));

  // listAll follows the tokens itself; the label selector leaves out kube-root-ca.crt, which
  // the controller-manager puts in every namespace.
  ListOptions all;
  all.labelSelector = "gvirtus.io/test-set=paging";
  all.limit = 50;
  auto everything = client->listAll(resources::kConfigMaps, ns.name(), all);
  REQUIRE(everything);
  CHECK(everything->items.size() == 120);
  CHECK(everything->continueToken.empty());
  std::set<std::string> again;
  for (const auto& item : everything->items) {
    again.insert(item["metadata"]["name"].get<std::string>());
  }
  CHECK(again == names);

  // Without the selector: ours plus kube-root-ca.crt (once the controller made it).
  REQUIRE(eventually([&] {
    return client->get(resources::kConfigMaps, ns.name(), "kube-root-ca.crt").has_value();
  }));
  ListOptions unfiltered;
  unfiltered.limit = 50;
  auto whole = client->listAll(resources::kConfigMaps, ns.name(), unfiltered);
  REQUIRE(whole);
  CHECK(whole->items.size() == 121);
}

json nodeObject(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels", {{"kubernetes.io/hostname", name}, {"gvirtus.io/test", "integration"}}},
            {"annotations", {{"kwok.x-k8s.io/node", "fake"}}}}},
          {"spec", json::object()}};
}

// Deletes a cluster-scoped test object at the end.
struct NodeGuard {
  KubeClient& client;
  std::string name;
  ~NodeGuard() { (void)client.remove(resources::kNodes, "", name); }
};

TEST_CASE("every patch type on a Node", "[integration][client]") {
  auto client = adminClient();
  const std::string name = "it-node-" + randomSuffix();
  REQUIRE(client->create(resources::kNodes, "", nodeObject(name)));
  NodeGuard guard{*client, name};

  SECTION("merge patch adds and removes labels") {
    auto patched = client->patch(resources::kNodes, "", name, PatchType::Merge,
                                 R"({"metadata":{"labels":{"gvirtus.io/frontend.allowed":"true",)"
                                 R"("gvirtus.io/test":null}}})");
    REQUIRE(patched);
    CHECK((*patched)["metadata"]["labels"]["gvirtus.io/frontend.allowed"] == "true");
    CHECK_FALSE((*patched)["metadata"]["labels"].contains("gvirtus.io/test"));
  }

  SECTION("strategic merge patch") {
    auto patched = client->patch(
        resources::kNodes, "", name, PatchType::StrategicMerge,
        R"({"metadata":{"labels":{"gvirtus.io/backend.allowed":"false"}},)"
        R"("spec":{"taints":[{"key":"gvirtus.io/test","value":"x","effect":"NoSchedule"}]}})");
    REQUIRE(patched);
    CHECK((*patched)["metadata"]["labels"]["gvirtus.io/backend.allowed"] == "false");
    CHECK((*patched)["metadata"]["labels"]["gvirtus.io/test"] == "integration");
    REQUIRE((*patched)["spec"]["taints"].size() == 1);
    CHECK((*patched)["spec"]["taints"][0]["key"] == "gvirtus.io/test");
  }

  SECTION("JSON patch, with an escaped key and a test operation") {
    JsonPatch ops;
    ops.test(jsonPointer({"metadata", "labels", "gvirtus.io/test"}), "integration");
    ops.add(jsonPointer({"metadata", "labels", "gvirtus.io/gpu.present"}), "false");
    auto patched = client->patch(resources::kNodes, "", name, PatchType::Json, ops.toJson().dump());
    REQUIRE(patched);
    CHECK((*patched)["metadata"]["labels"]["gvirtus.io/gpu.present"] == "false");

    JsonPatch failing;
    failing.test(jsonPointer({"metadata", "labels", "gvirtus.io/test"}), "something else");
    failing.add(jsonPointer({"metadata", "labels", "never"}), "x");
    auto refused =
        client->patch(resources::kNodes, "", name, PatchType::Json, failing.toJson().dump());
    REQUIRE_FALSE(refused);
    CHECK(refused.error().httpStatus == 422);
    auto after = client->get(resources::kNodes, "", name);
    REQUIRE(after);
    CHECK_FALSE((*after)["metadata"]["labels"].contains("never"));
  }

  SECTION("server-side apply, its conflicts and force") {
    WriteOptions a;
    a.fieldManager = "it-manager-a";
    const std::string mine = json{{"apiVersion", "v1"},
                                  {"kind", "Node"},
                                  {"metadata", {{"name", name}, {"labels", {{"it/owned", "a"}}}}}}
                                 .dump();
    auto applied = client->patch(resources::kNodes, "", name, PatchType::Apply, mine, a);
    REQUIRE(applied);
    CHECK((*applied)["metadata"]["labels"]["it/owned"] == "a");

    WriteOptions b;
    b.fieldManager = "it-manager-b";
    const std::string theirs = json{{"apiVersion", "v1"},
                                    {"kind", "Node"},
                                    {"metadata", {{"name", name}, {"labels", {{"it/owned", "b"}}}}}}
                                   .dump();
    auto conflict = client->patch(resources::kNodes, "", name, PatchType::Apply, theirs, b);
    REQUIRE_FALSE(conflict);
    CHECK(conflict.error().isConflict());

    WriteOptions dry = b;
    dry.dryRun = true;
    dry.force = true;
    auto dryRun = client->patch(resources::kNodes, "", name, PatchType::Apply, theirs, dry);
    REQUIRE(dryRun);
    CHECK((*dryRun)["metadata"]["labels"]["it/owned"] == "b");
    CHECK(client->get(resources::kNodes, "", name).value()["metadata"]["labels"]["it/owned"] ==
          "a");

    b.force = true;
    auto forced = client->patch(resources::kNodes, "", name, PatchType::Apply, theirs, b);
    REQUIRE(forced);
    CHECK((*forced)["metadata"]["labels"]["it/owned"] == "b");
    bool bManages = false;
    for (const auto& entry : (*forced)["metadata"]["managedFields"]) {
      if (entry["manager"] == "it-manager-b" && entry["operation"] == "Apply") {
        bManages = true;
      }
    }
    CHECK(bManages);
  }

  SECTION("merge patch of the status subresource (capacity a test sets)") {
    // kwok initializes a new node's status once (conditions, addresses, capacity it keeps);
    // a patch that raced that write could be lost. Afterwards kwok renews conditions only.
    REQUIRE(eventually([&] {
      auto node = client->get(resources::kNodes, "", name);
      if (!node) {
        return false;
      }
      for (const auto& condition : (*node)["status"].value("conditions", json::array())) {
        if (condition.value("type", "") == "Ready" && condition.value("status", "") == "True") {
          return true;
        }
      }
      return false;
    }));
    WriteOptions status;
    status.subresource = "status";
    auto patched = client->patch(
        resources::kNodes, "", name, PatchType::Merge,
        R"({"status":{"capacity":{"nvidia.com/gpu":"8"},"allocatable":{"nvidia.com/gpu":"8"}}})",
        status);
    REQUIRE(patched);
    CHECK((*patched)["status"]["capacity"]["nvidia.com/gpu"] == "8");
    auto later = client->get(resources::kNodes, "", name);
    REQUIRE(later);
    CHECK((*later)["status"]["allocatable"]["nvidia.com/gpu"] == "8");
  }
}

json podObject(const std::string& ns, const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", "it"}}}}},
          {"spec",
           {{"containers",
             {{{"name", "first"}, {"image", "registry.invalid/first:1"}},
              {{"name", "second"}, {"image", "registry.invalid/second:1"}}}},
            // Never scheduled: no node carries this label.
            {"nodeSelector", {{"gvirtus.io/test-no-such-node", "true"}}}}}};
}

TEST_CASE("every patch type on a Pod", "[integration][client]") {
  auto client = adminClient();
  TestNamespace ns(*client, "it-pod");
  ns.waitForDefaultServiceAccount();
  auto created = client->create(resources::kPods, ns.name(), podObject(ns.name(), "p"));
  REQUIRE(created);

  SECTION("merge patch on labels") {
    auto patched = client->patch(resources::kPods, ns.name(), "p", PatchType::Merge,
                                 R"({"metadata":{"labels":{"gvirtus.io/enabled":"true"}}})");
    REQUIRE(patched);
    CHECK((*patched)["metadata"]["labels"]["gvirtus.io/enabled"] == "true");
    CHECK((*patched)["metadata"]["labels"]["app"] == "it");
  }

  SECTION("strategic merge patch merges containers by name") {
    auto patched = client->patch(
        resources::kPods, ns.name(), "p", PatchType::StrategicMerge,
        R"({"spec":{"containers":[{"name":"second","image":"registry.invalid/second:2"}]}})");
    REQUIRE(patched);
    const auto& containers = (*patched)["spec"]["containers"];
    REQUIRE(containers.size() == 2);
    CHECK(containers[0]["image"] == "registry.invalid/first:1");
    CHECK(containers[1]["image"] == "registry.invalid/second:2");

    // The same body as a merge patch replaces the whole list: the API server refuses a
    // change of the container set.
    auto replaced = client->patch(
        resources::kPods, ns.name(), "p", PatchType::Merge,
        R"({"spec":{"containers":[{"name":"second","image":"registry.invalid/second:3"}]}})");
    REQUIRE_FALSE(replaced);
    CHECK(replaced.error().httpStatus == 422);
  }

  SECTION("JSON patch adds an annotation whose key holds a slash") {
    JsonPatch ops;
    ops.add("/metadata/annotations", json::object());
    ops.add(jsonPointer({"metadata", "annotations", "gvirtus.io/backend"}), "10.1.2.3:9999");
    auto patched =
        client->patch(resources::kPods, ns.name(), "p", PatchType::Json, ops.toJson().dump());
    REQUIRE(patched);
    CHECK((*patched)["metadata"]["annotations"]["gvirtus.io/backend"] == "10.1.2.3:9999");
  }

  SECTION("server-side apply of annotations") {
    WriteOptions options;
    options.fieldManager = "it-apply";
    const std::string body = json{{"apiVersion", "v1"},
                                  {"kind", "Pod"},
                                  {"metadata",
                                   {{"name", "p"},
                                    {"namespace", ns.name()},
                                    {"annotations", {{"gvirtus.io/backend-status", "waiting"}}}}}}
                                 .dump();
    auto applied = client->patch(resources::kPods, ns.name(), "p", PatchType::Apply, body, options);
    REQUIRE(applied);
    CHECK((*applied)["metadata"]["annotations"]["gvirtus.io/backend-status"] == "waiting");
    CHECK((*applied)["spec"]["containers"].size() == 2);  // untouched

    WriteOptions noManager;
    auto refused =
        client->patch(resources::kPods, ns.name(), "p", PatchType::Apply, body, noManager);
    CHECK_FALSE(refused);  // apply needs a field manager
  }
}

TEST_CASE("a watch sees adds updates and deletes in order", "[integration][watch]") {
  auto client = adminClient();
  TestNamespace ns(*client, "it-watch");
  auto start = client->list(resources::kConfigMaps, ns.name());
  REQUIRE(start);

  std::mutex mutex;
  std::vector<std::string> seen;
  std::vector<long long> versions;
  std::stop_source stop;
  Result<void> outcome;
  std::thread watcher([&] {
    WatchOptions options;
    options.resourceVersion = start->resourceVersion;
    options.allowBookmarks = true;
    outcome = client->watch(
        resources::kConfigMaps, ns.name(), options,
        [&](const WatchEvent& event) {
          if (event.type == "BOOKMARK") {
            return true;
          }
          const std::string name = event.object["metadata"].value("name", "");
          if (name.rfind("w-", 0) != 0) {
            return true;  // kube-root-ca.crt
          }
          std::lock_guard lock(mutex);
          seen.push_back(event.type + " " + name);
          versions.push_back(std::stoll(resourceVersionOf(event.object)));
          return true;
        },
        stop.get_token());
  });

  REQUIRE(client->create(resources::kConfigMaps, ns.name(), configMap(ns.name(), "w-a", {})));
  REQUIRE(client->patch(resources::kConfigMaps, ns.name(), "w-a", PatchType::Merge,
                        R"({"data":{"k":"1"}})"));
  REQUIRE(client->create(resources::kConfigMaps, ns.name(), configMap(ns.name(), "w-b", {})));
  REQUIRE(client->remove(resources::kConfigMaps, ns.name(), "w-a"));
  REQUIRE(client->remove(resources::kConfigMaps, ns.name(), "w-b"));

  REQUIRE(eventually([&] {
    std::lock_guard lock(mutex);
    return seen.size() >= 5;
  }));
  const auto stopping = std::chrono::steady_clock::now();
  stop.request_stop();
  watcher.join();
  CHECK(std::chrono::steady_clock::now() - stopping < 2s);
  CHECK(outcome);
  std::lock_guard lock(mutex);
  CHECK(seen == std::vector<std::string>{"ADDED w-a", "MODIFIED w-a", "ADDED w-b", "DELETED w-a",
                                         "DELETED w-b"});
  CHECK(std::is_sorted(versions.begin(), versions.end()));
}

// A watch from a resourceVersion older than the API server's watch cache window, such as
// "1": up to 1.33 the cache answers with an ERROR event of code 410 ("too old resource
// version") on every fresh cluster. From 1.35 the API server serves such a watch from etcd
// until etcd compacts that revision away (every 5 minutes), replaying what happened since;
// only then is it 410. Either answer must come through the client as what it is: a Gone
// error the cache relists on, or the replayed events and a normal end.
TEST_CASE("a watch from a too-old resourceVersion gets 410 Gone or the history since",
          "[integration][watch]") {
  auto client = adminClient();
  WatchOptions options;
  options.resourceVersion = "1";
  options.timeoutSeconds = 2;
  std::vector<std::string> types;
  auto outcome = client->watch(resources::kConfigMaps, "", options,
                               [&](const WatchEvent& event) {
                                 types.push_back(event.type);
                                 return true;
                               },
                               {});
  if (!outcome) {
    CHECK(outcome.error().isGone());
    CHECK(outcome.error().message.find("too old resource version") != std::string::npos);
    CHECK(types.empty());
  } else {
    WARN("this API server serves a watch from revision 1 out of etcd (" << types.size()
                                                                        << " events replayed)");
    // Every namespace's kube-root-ca.crt ConfigMap was added after revision 1.
    REQUIRE_FALSE(types.empty());
    CHECK(std::ranges::count(types, std::string("ADDED")) > 0);
    CHECK(std::ranges::count(types, std::string("ERROR")) == 0);
  }
}

}  // namespace
}  // namespace gvirtus::integration
