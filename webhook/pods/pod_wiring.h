#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/base/error.h"

// What the webhook changes in a GVirtuS pod (docs/pod-contract.md). Each function
// mutates the pod in place, changing only what is missing or different, so running it on
// a pod it already ran on changes nothing: callers mutate a copy of the pod they were given
// and send JsonPatch::between(original, copy), which is empty for a reinvoked webhook.
// The command and args are never touched.
namespace gvirtus::webhook {

struct WiringOptions {
  // limits nvidia.com/gpu: 1 on the first wired container when no wired container asks,
  // unless KAI-Scheduler schedules the pod (its spec.schedulerName is `schedulerName`) and
  // it asks for a KAI GPU share (gpu-fraction, gpu-memory): KAI then counts the share and
  // refuses a pod that also asks for nvidia.com/gpu. Any other scheduler ignores the share,
  // and without the limit a namespace's nvidia.com/gpu ResourceQuota would not count the pod.
  bool addGpuLimit = true;
  // spec.schedulerName for pods that have none of their own (empty: leave it): the
  // KAI-Scheduler's name where KAI schedules GVirtuS pods.
  std::string schedulerName;
  // label kai.scheduler/queue for pods without one (empty: leave it).
  std::string kaiQueue;
};

// A container the webhook wires, as the pod spec addresses it.
struct WiredContainer {
  std::string field;  // "containers" or "initContainers"
  size_t index = 0;
  std::string name;
};

// The containers named by gvirtus.io/containers (app containers first, then init
// containers), or every app container when the annotation is absent or empty. A name the
// pod does not have is an error naming it.
Result<std::vector<WiredContainer>> wiredContainers(const nlohmann::json& pod);

// Everything but the backend: the downwardAPI volume gvirtus-config, its read-only mount
// at /etc/gvirtus and GVIRTUS_CONFIG (unless set) in each wired container, the node
// selector gvirtus.io/frontend.allowed=true, the GPU limit, the scheduler name and the
// KAI queue label. Errors (denials): an unknown container name, a container that mounts
// something else at /etc/gvirtus, wired containers that ask for fewer than one
// nvidia.com/gpu in all; the pod is then left partly wired.
Result<void> wirePod(nlohmann::json& pod, const WiringOptions& options);

// One backend given to one pod.
struct Assignment {
  std::string endpoint;       // "IP:PORT"
  std::string backendPod;     // "namespace/name"; empty for static backends
  std::string properties;     // the rendered properties.json
  std::string preferredZone;  // same-zone: a preferred node affinity for this zone
  // The GPU of the backend the pod's GPU memory counts against; none when it asks for none.
  std::optional<int64_t> gpuIndex;
  std::string assignedBy;  // the webhook instance that chose (gvirtus.io/assigned-by)
};

// The backend annotations (gvirtus.io/backend-pod removed when empty; gvirtus.io/backend-gpu
// set to the GPU index, removed when there is none), the preferred zone affinity, and the end of
// waiting: the scheduling gate gvirtus.io/backend and gvirtus.io/backend-status are removed when
// present.
void assignBackend(nlohmann::json& pod, const Assignment& assignment);

// A pod no backend can take yet: the scheduling gate gvirtus.io/backend and
// gvirtus.io/backend-status: waiting.
void markWaiting(nlohmann::json& pod);

// A pod waits while it carries the gate gvirtus.io/backend and is not being deleted.
bool isWaiting(const nlohmann::json& pod);

// True for a pod that the webhook wired and gated at admission: it carries
// gvirtus.io/backend-status: waiting (markWaiting()) and the gvirtus-config volume that
// projects properties.json (wirePod()). A pod's volumes cannot change after creation: a pod
// created with the gate but without the label gvirtus.io/enabled, which the webhook never
// saw, lacks the volume however it is labelled and annotated later.
bool gatedByWebhook(const nlohmann::json& pod);

}  // namespace gvirtus::webhook
