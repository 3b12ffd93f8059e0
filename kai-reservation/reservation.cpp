#include "kai-reservation/reservation.h"

#include <nlohmann/json.hpp>

#include "common/base/json_access.h"
#include "common/base/strings.h"
#include "common/contract/labels.h"

namespace gvirtus::kai_reservation {

using nlohmann::json;

Result<std::string> reservedDevice(std::string_view vgpuIds) {
  const auto devices = splitList(vgpuIds);
  if (devices.empty()) {
    return fail(std::string(names::kVgpuIdsEnv) +
                " is empty: the container got no virtual GPU (does it ask for one "
                "nvidia.com/gpu on a node where gvirtus-device-plugin runs?)");
  }
  if (devices.size() > 1) {
    return fail(std::string(names::kVgpuIdsEnv) + "=\"" + std::string(vgpuIds) +
                "\": a reservation holds exactly one device");
  }
  return devices.front();
}

Result<std::string> recordReservation(KubeClient& client, const std::string& podNamespace,
                                      const std::string& podName, const std::string& device) {
  auto pod = client.get(resources::kPods, podNamespace, podName);
  if (!pod) {
    return fail(pod.error().context("reading pod " + podNamespace + "/" + podName));
  }
  if (auto existing = stringAt(*pod, {"metadata", "annotations", names::kKaiReservedGpuAnnotation});
      !existing.empty()) {
    return existing;
  }
  // The resourceVersion makes it a compare-and-swap: a concurrent writer wins, and the
  // caller reads again.
  const json patch = {{"metadata",
                       {{"resourceVersion", stringAt(*pod, {"metadata", "resourceVersion"})},
                        {"annotations", {{names::kKaiReservedGpuAnnotation, device}}}}}};
  auto patched =
      client.patch(resources::kPods, podNamespace, podName, PatchType::Merge, patch.dump());
  if (!patched) {
    return fail(patched.error().context("annotating pod " + podNamespace + "/" + podName));
  }
  return device;
}

}  // namespace gvirtus::kai_reservation
