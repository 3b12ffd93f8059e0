#pragma once

#include <string_view>

#include "common/contract/labels.h"

// The names of the webhook's pod contract (docs/pod-contract.md): those common/contract/labels.h
// holds (shared with the other binaries), and below the webhook's own.
namespace gvirtus::webhook {

// The shared names (common/contract/labels.h), unqualified here: declared one by one, so that a
// name the webhook defines itself can never be shadowed by, or clash with, a shared one unseen.
using names::kAutoscaledAnnotation;
using names::kBackendAllowed;
using names::kBackendAnnotation;
using names::kBackendDrainingAnnotation;
using names::kBackendGpuAnnotation;
using names::kBackendLostCondition;
using names::kBackendLostReason;
using names::kBackendLostRecreatedReason;
using names::kBackendPodAnnotation;
using names::kBackendPolicyAnnotation;
using names::kBackendStatusAnnotation;
using names::kContainersAnnotation;
using names::kDraLabel;
using names::kEnabledLabel;
using names::kFrontendAllowed;
using names::kGpuMemoryAnnotation;
using names::kGpuPresent;
using names::kGpuResource;
using names::kGpusAnnotation;
using names::kKaiGpuFractionAnnotation;
using names::kKaiGpuMemoryAnnotation;
using names::kKaiReservedGpuAnnotation;
using names::kLoadAnnotation;
using names::kNvidiaGpuPresent;
using names::kPeerMemoryAnnotation;
using names::kPeersAnnotation;
using names::kPropertiesAnnotation;
using names::kSchedulingGate;
using names::kSchedulingMapAnnotation;
using names::kSystemNamespace;
using names::kVgpuIdsEnv;
using names::kZoneLabel;

// Input on the pod.
inline constexpr const char* kPodIndexLabel = "apps.kubernetes.io/pod-index";
// KAI-Scheduler's pod annotation naming the pod's PodGroup (a gang).
inline constexpr const char* kPodGroupAnnotation = "pod-group-name";

// Output on the pod.
inline constexpr const char* kBackendStatusWaiting = "waiting";
// The webhook instance that gave the pod its backend: each replica counts the others'
// recent assignments from the cluster's pods, and its own from memory.
inline constexpr const char* kAssignedByAnnotation = "gvirtus.io/assigned-by";
inline constexpr const char* kConfigVolume = "gvirtus-config";
inline constexpr const char* kConfigMountPath = "/etc/gvirtus";
inline constexpr const char* kConfigFile = "properties.json";
inline constexpr const char* kConfigEnv = "GVIRTUS_CONFIG";
inline constexpr const char* kConfigPath = "/etc/gvirtus/properties.json";
inline constexpr const char* kKaiQueueLabel = "kai.scheduler/queue";
inline constexpr const char* kCudaVisibleDevicesEnv = "CUDA_VISIBLE_DEVICES";

// On nodes.
inline constexpr const char* kHostnameLabel = "kubernetes.io/hostname";
// What GPU feature discovery labels a GPU node with: GPUs, and MiB of memory per GPU.
inline constexpr const char* kGpuCountLabel = "nvidia.com/gpu.count";
inline constexpr const char* kGpuMemoryLabel = "nvidia.com/gpu.memory";

}  // namespace gvirtus::webhook
