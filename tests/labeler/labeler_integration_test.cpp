// gvirtus-labeler as a host process against the real control plane (kube-apiserver,
// etcd, kwok nodes), the way its DaemonSet pod runs it on each node.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "support/child_process.h"
#include "support/cluster_env.h"
#include "support/temp_dir.h"

using namespace gvirtus::testing;
using nlohmann::json;

namespace {

std::string uniqueName(const std::string& base) {
  return base + "-" + std::to_string(getpid()) + "-" + std::to_string(std::rand() % 100000);
}

json nodeLabels(gvirtus::KubeClient& client, const std::string& name) {
  auto node = client.get(gvirtus::resources::kNodes, "", name);
  if (!node) {
    return json::object();
  }
  return (*node)["metadata"].value("labels", json::object());
}

void createNode(gvirtus::KubeClient& client, const std::string& name, json labels) {
  json node = {
      {"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}, {"labels", labels}}}};
  auto created = client.create(gvirtus::resources::kNodes, "", node);
  REQUIRE(created.has_value());
}

struct Labeler {
  int healthPort = freePort();
  std::unique_ptr<ChildProcess> process;

  double metric(const std::string& sample) const {
    return metricValue(httpGet(healthPort, "/metrics"), sample);
  }
  bool running() const { return process->running(); }
};

Labeler startLabeler(const std::string& node, const TempDir& dir) {
  Labeler labeler;
  labeler.process = std::make_unique<ChildProcess>(std::vector<std::string>{
      binDir() + "/gvirtus-labeler", "--kubeconfig", kubeconfigPath(), "--node-name", node,
      "--gpu-probe-paths", (dir.path() / "nvidiactl").string(), "--gpu-probe-interval", "200ms",
      "--health-addr", "127.0.0.1:" + std::to_string(labeler.healthPort), "--log-level", "debug"});
  return labeler;
}

bool labelIs(gvirtus::KubeClient& client, const std::string& node, const std::string& key,
             const std::string& value) {
  auto labels = nodeLabels(client, node);
  return labels.contains(key) && labels[key] == value;
}

}  // namespace

TEST_CASE(
    "labeler writes defaults in one PATCH, keeps operator values, restores deleted "
    "labels and follows the GPU probe",
    "[labeler][integration]") {
  auto client = adminClient();
  TempDir dir;
  const std::string bare = uniqueName("lab-bare");
  const std::string operatorSet = uniqueName("lab-op");
  createNode(*client, bare, json::object());
  createNode(*client, operatorSet,
             {{"gvirtus.io/frontend.allowed", "false"},
              {"gvirtus.io/backend.allowed", "true"},
              {"gvirtus.io/gpu.present", "false"}});

  auto labelerBare = startLabeler(bare, dir);
  auto labelerOp = startLabeler(operatorSet, dir);
  REQUIRE(eventually([&] {
    return labelIs(*client, bare, "gvirtus.io/frontend.allowed", "true") &&
           labelIs(*client, bare, "gvirtus.io/backend.allowed", "false") &&
           labelIs(*client, bare, "gvirtus.io/gpu.present", "false");
  }));
  // Count the writes once each labeler has decided: the bare node's labeler has reconciled
  // the echo of its own PATCH too (a stale cache must not bring a second one), the other
  // has looked at its node. One PATCH for the bare node, none for the labelled one.
  REQUIRE(eventually([&] { return labelerBare.metric("gvirtus_labeler_reconciles_total") >= 2; }));
  REQUIRE(eventually([&] { return labelerOp.metric("gvirtus_labeler_reconciles_total") >= 1; }));
  CHECK(labelerBare.metric("gvirtus_labeler_patches_total") == 1);
  CHECK(labelerOp.metric("gvirtus_labeler_patches_total") == 0);
  CHECK(eventually([&] { return httpGet(labelerBare.healthPort, "/readyz") == "ok\n"; }));
  auto op = nodeLabels(*client, operatorSet);
  CHECK(op["gvirtus.io/frontend.allowed"] == "false");
  CHECK(op["gvirtus.io/backend.allowed"] == "true");

  SECTION("a deleted role label comes back with its default") {
    auto [code, out] = kubectl({"label", "node", bare, "gvirtus.io/backend.allowed-"});
    REQUIRE(code == 0);
    CHECK(eventually([&] { return labelIs(*client, bare, "gvirtus.io/backend.allowed", "false"); },
                     std::chrono::seconds(10)));
    CHECK(labelerBare.metric("gvirtus_labeler_patches_total") == 2);
  }
  SECTION("gpu.present follows the probe paths") {
    std::ofstream(dir.path() / "nvidiactl") << "";
    CHECK(eventually([&] { return labelIs(*client, bare, "gvirtus.io/gpu.present", "true"); },
                     std::chrono::seconds(10)));
    // The operator-labelled node's labeler sees the same probe path: its gpu.present is
    // the detected truth too, while its role labels stay the operator's.
    CHECK(
        eventually([&] { return labelIs(*client, operatorSet, "gvirtus.io/gpu.present", "true"); },
                   std::chrono::seconds(10)));
    CHECK(labelIs(*client, operatorSet, "gvirtus.io/frontend.allowed", "false"));
  }
  SECTION("a kube-apiserver restart is survived") {
    auto [code, out] = runCommand({"/bin/bash", sourceDir() + "/tests/cluster/restart-apiserver.sh",
                                   "--down", "2", clusterName()},
                                  {}, std::chrono::seconds(120));
    INFO(out);
    REQUIRE(code == 0);
    auto [c2, o2] = kubectl({"label", "node", bare, "gvirtus.io/frontend.allowed-"});
    REQUIRE(c2 == 0);
    CHECK(eventually([&] { return labelIs(*client, bare, "gvirtus.io/frontend.allowed", "true"); },
                     std::chrono::seconds(40)));
    CHECK(labelerBare.running());
  }
  CHECK(labelerBare.running());
  labelerBare.process->kill(SIGTERM);
  labelerOp.process->kill(SIGTERM);
  CHECK(labelerBare.process->wait(std::chrono::seconds(10)) == 0);
  CHECK(labelerOp.process->wait(std::chrono::seconds(10)) == 0);
  client->remove(gvirtus::resources::kNodes, "", bare);
  client->remove(gvirtus::resources::kNodes, "", operatorSet);
}

TEST_CASE("labeler --once exits 0 after labelling and 1 for a missing node",
          "[labeler][integration]") {
  auto client = adminClient();
  const std::string node = uniqueName("lab-once");
  createNode(*client, node, json::object());
  auto [code, out] =
      runCommand({binDir() + "/gvirtus-labeler", "--kubeconfig", kubeconfigPath(), "--node-name",
                  node, "--once", "--health-addr", "", "--gpu-probe-paths", "/nonexistent/gpu"});
  INFO(out);
  CHECK(code == 0);
  CHECK(labelIs(*client, node, "gvirtus.io/frontend.allowed", "true"));
  CHECK(labelIs(*client, node, "gvirtus.io/gpu.present", "false"));

  auto [missingCode, missingOut] =
      runCommand({binDir() + "/gvirtus-labeler", "--kubeconfig", kubeconfigPath(), "--node-name",
                  "no-such-node-" + node, "--once", "--health-addr", ""});
  INFO(missingOut);
  CHECK(missingCode == 1);
  CHECK(missingOut.find("not found") != std::string::npos);
  client->remove(gvirtus::resources::kNodes, "", node);
}
