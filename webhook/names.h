#pragma once

#include <string_view>

#include "common/labels.h"

// The names of the webhook's pod contract (docs/pod-contract.md): those
// common/labels.h holds, and the webhook's own.
namespace gvirtus::webhook {

// Input on the pod.
inline constexpr std::string_view kEnabledLabel = names::kEnabledLabel;
inline constexpr std::string_view kContainersAnnotation = names::kContainersAnnotation;
inline constexpr std::string_view kGpuMemoryAnnotation = names::kGpuMemoryAnnotation;
inline constexpr std::string_view kGpusAnnotation = names::kGpusAnnotation;
inline constexpr std::string_view kPolicyAnnotation = names::kBackendPolicyAnnotation;
inline constexpr std::string_view kSchedulingMapAnnotation = names::kSchedulingMapAnnotation;
inline constexpr std::string_view kPodIndexLabel = "apps.kubernetes.io/pod-index";
// KAI-Scheduler's pod annotation naming the pod's PodGroup (a gang).
inline constexpr std::string_view kPodGroupAnnotation = "pod-group-name";

// Output on the pod.
inline constexpr std::string_view kBackendAnnotation = names::kBackendAnnotation;
inline constexpr std::string_view kBackendPodAnnotation = names::kBackendPodAnnotation;
inline constexpr std::string_view kBackendGpuAnnotation = names::kBackendGpuAnnotation;
inline constexpr std::string_view kPropertiesAnnotation = names::kPropertiesAnnotation;
inline constexpr std::string_view kBackendStatusAnnotation = names::kBackendStatusAnnotation;
inline constexpr std::string_view kBackendStatusWaiting = "waiting";
// The webhook instance that gave the pod its backend: each replica counts the others'
// recent assignments from the cluster's pods, and its own from memory.
inline constexpr std::string_view kAssignedByAnnotation = "gvirtus.io/assigned-by";
inline constexpr std::string_view kSchedulingGate = names::kSchedulingGate;
inline constexpr std::string_view kConfigVolume = "gvirtus-config";
inline constexpr std::string_view kConfigMountPath = "/etc/gvirtus";
inline constexpr std::string_view kConfigFile = "properties.json";
inline constexpr std::string_view kConfigEnv = "GVIRTUS_CONFIG";
inline constexpr std::string_view kConfigPath = "/etc/gvirtus/properties.json";
inline constexpr std::string_view kFrontendNodeLabel = names::kFrontendAllowed;
inline constexpr std::string_view kGpuResource = names::kGpuResource;
inline constexpr std::string_view kKaiQueueLabel = "kai.scheduler/queue";
// KAI-Scheduler's GPU sharing annotations on a pod: a share of one GPU ("0.5"), or MiB of
// one GPU's memory ("2000"). On a GVirtuS pod they count against the backend's GPU.
inline constexpr std::string_view kKaiGpuFractionAnnotation = "gpu-fraction";
inline constexpr std::string_view kKaiGpuMemoryAnnotation = "gpu-memory";
inline constexpr std::string_view kCudaVisibleDevicesEnv = "CUDA_VISIBLE_DEVICES";

// On backend pods (written by the backend shim) and nodes.
inline constexpr std::string_view kLoadAnnotation = names::kLoadAnnotation;
// Written by the webhook's peer publisher (webhook/peer_publisher.h): the IPv4 addresses
// of the pods assigned to the backend pod, comma-separated; the backend shim accepts
// sessions from these only. "" means none; absent means not published yet.
inline constexpr std::string_view kPeersAnnotation = names::kPeersAnnotation;
inline constexpr std::string_view kZoneLabel = names::kZoneLabel;
inline constexpr std::string_view kHostnameLabel = "kubernetes.io/hostname";
inline constexpr std::string_view kBackendAllowedLabel = names::kBackendAllowed;
inline constexpr std::string_view kAutoscaledAnnotation = names::kAutoscaledAnnotation;
inline constexpr std::string_view kDrainingAnnotation = names::kBackendDrainingAnnotation;
// What GPU feature discovery labels a GPU node with: GPUs, and MiB of memory per GPU.
inline constexpr std::string_view kGpuCountLabel = "nvidia.com/gpu.count";
inline constexpr std::string_view kGpuMemoryLabel = "nvidia.com/gpu.memory";

}  // namespace gvirtus::webhook
