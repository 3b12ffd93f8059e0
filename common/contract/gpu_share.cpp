#include "common/contract/gpu_share.h"

#include "common/base/json_access.h"
#include "common/base/strings.h"
#include "common/cache/object_cache.h"
#include "common/contract/labels.h"
#include "common/contract/pod_status.h"

namespace gvirtus {

std::optional<std::pair<std::string, GpuShare>> heldShare(const nlohmann::json& pod) {
  if (podFinished(pod)) {
    return std::nullopt;
  }
  const std::string endpoint =
      stringAt(pod, {"metadata", "annotations", names::kBackendAnnotation});
  const std::string gpu = stringAt(pod, {"metadata", "annotations", names::kBackendGpuAnnotation});
  auto index = parseNonNegative(gpu);
  if (endpoint.empty() || !index) {
    return std::nullopt;
  }
  // A pod whose annotations no longer parse was admitted with them: it holds nothing
  // the chooser could measure.
  auto demand = requirementsFromPod(pod);
  if (!demand || !asksForGpuMemory(*demand)) {
    return std::nullopt;
  }
  GpuShare share{cacheKey(pod), *index, *demand};
  return std::pair{endpoint, std::move(share)};
}

}  // namespace gvirtus
