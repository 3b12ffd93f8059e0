// gvirtus-kai-reservation as a host process against the real control plane, as KAI's
// binder runs it in its reservation pod: POD_NAME, POD_NAMESPACE and the device plugin's
// GVIRTUS_VGPU_IDS in the environment, no arguments but the kubeconfig.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>

#include "common/base/json_access.h"
#include "common/kube/api/resource.h"
#include "support/child_process.h"
#include "support/cluster_env.h"

using namespace gvirtus::testing;
using nlohmann::json;

namespace {

const std::string kAnnotation = "run.ai/reserve_for_gpu_index";

std::string createPod(gvirtus::KubeClient& client) {
  const std::string name = "gpu-reservation-" + std::to_string(getpid());
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", "default"}}},
              // Gated: no scheduler or kwok writes to it while the program does.
              {"spec",
               {{"schedulingGates", json::array({{{"name", "gvirtus.io/test"}}})},
                {"containers", json::array({{{"name", "r"}, {"image", "x:1"}}})}}}};
  client.remove(gvirtus::resources::kPods, "default", name);
  REQUIRE(eventually(
      [&] { return client.create(gvirtus::resources::kPods, "default", pod).has_value(); }));
  return name;
}

std::string reserved(gvirtus::KubeClient& client, const std::string& name) {
  auto pod = client.get(gvirtus::resources::kPods, "default", name);
  return pod ? gvirtus::stringAt(*pod, {"metadata", "annotations", kAnnotation}) : "";
}

std::unique_ptr<ChildProcess> start(const std::string& pod, const std::string& devices,
                                    const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv{binDir() + "/gvirtus-kai-reservation", "--kubeconfig",
                                kubeconfigPath()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return std::make_unique<ChildProcess>(
      argv, std::vector<std::string>{"POD_NAME=" + pod, "POD_NAMESPACE=default",
                                     "GVIRTUS_VGPU_IDS=" + devices});
}

}  // namespace

TEST_CASE("the reservation pod writes its virtual GPU once, holds it until SIGTERM",
          "[kai-reservation][integration]") {
  auto client = adminClient();
  const std::string pod = createPod(*client);

  auto first = start(pod, "vgpu-2");
  CHECK(eventually([&] { return reserved(*client, pod) == "vgpu-2"; }));
  CHECK(first->running());  // it holds the device: KAI deletes the pod when the GPU is free
  first->kill(SIGTERM);
  CHECK(first->wait(std::chrono::seconds(5)) == 0);

  // A restarted container got another device from the kubelet: the binder may already have
  // handed out the first one, so the pod keeps it.
  auto again = start(pod, "vgpu-6");
  CHECK(eventually([&] { return again->output().find("keeping it") != std::string::npos; }));
  CHECK(reserved(*client, pod) == "vgpu-2");
  again->kill(SIGTERM);
  CHECK(again->wait(std::chrono::seconds(5)) == 0);
  client->remove(gvirtus::resources::kPods, "default", pod);
}

TEST_CASE("a pod that cannot be annotated is retried, then exit 1 with the reason",
          "[kai-reservation][integration]") {
  auto missing = start("no-such-reservation-pod", "vgpu-0", {"--retry-for", "1s"});
  auto code = missing->wait(std::chrono::seconds(15));
  INFO(missing->output());
  CHECK(code == 1);
  CHECK_THAT(missing->output(), Catch::Contains("not found") && Catch::Contains("giving up"));
}
