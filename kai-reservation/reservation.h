#pragma once

#include <string>
#include <string_view>

#include "common/base/error.h"
#include "common/kube/client.h"

// KAI-Scheduler shares a GPU between fraction pods by first placing a reservation pod that
// asks for one whole nvidia.com/gpu on the node; its binder then waits for that pod to
// write, on itself, which device it got (annotation run.ai/reserve_for_gpu_index), and
// hands that device to the fraction pods. Upstream's reservation image asks NVML, which a
// GVirtuS virtual GPU has not: here the device comes from our device plugin's Allocate
// (env GVIRTUS_VGPU_IDS).
namespace gvirtus::kai_reservation {

// The one virtual device in GVIRTUS_VGPU_IDS's value (KAI's reservation pod asks for
// exactly one): an error when there is none or more than one.
Result<std::string> reservedDevice(std::string_view vgpuIds);

// Writes `device` as the pod's reserved GPU, unless the pod already names one: then that
// one is kept and returned (a restarted container must not change what the binder may
// already have handed to fraction pods). Returns the device the pod names afterwards.
Result<std::string> recordReservation(KubeClient& client, const std::string& podNamespace,
                                      const std::string& podName, const std::string& device);

}  // namespace gvirtus::kai_reservation
