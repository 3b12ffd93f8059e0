#pragma once

// Label, annotation and resource names of the public contract (docs/pod-contract.md). Users type
// them and acceptance checks call them: never change a value here.
namespace gvirtus::names {

// Node labels.
inline constexpr const char* kFrontendAllowed = "gvirtus.io/frontend.allowed";
inline constexpr const char* kBackendAllowed = "gvirtus.io/backend.allowed";
inline constexpr const char* kGpuPresent = "gvirtus.io/gpu.present";
inline constexpr const char* kNvidiaGpuPresent = "nvidia.com/gpu.present";
inline constexpr const char* kZoneLabel = "topology.kubernetes.io/zone";

// Node annotations of the webhook's backend autoscaler (--autoscale-candidates): when it
// opted the node in, and since when the node's backend takes no new pods.
inline constexpr const char* kAutoscaledAnnotation = "gvirtus.io/autoscaled";
inline constexpr const char* kBackendDrainingAnnotation = "gvirtus.io/backend.draining";

// Pod label and annotations.
inline constexpr const char* kEnabledLabel = "gvirtus.io/enabled";
// On a pod that reaches a backend through a DRA claim (docs/dra.md): the backends'
// NetworkPolicy lets it through to their port, and the webhook's peer publisher watches
// such pods; the backend's peer list, from the claim's reservation, decides.
inline constexpr const char* kDraLabel = "gvirtus.io/dra";
inline constexpr const char* kContainersAnnotation = "gvirtus.io/containers";
inline constexpr const char* kGpuMemoryAnnotation = "gvirtus.io/gpu-memory";
inline constexpr const char* kGpusAnnotation = "gvirtus.io/gpus";
inline constexpr const char* kBackendPolicyAnnotation = "gvirtus.io/backend-policy";
inline constexpr const char* kBackendAnnotation = "gvirtus.io/backend";
inline constexpr const char* kBackendPodAnnotation = "gvirtus.io/backend-pod";
// The GPU of the backend a pod asking for GPU memory was given (its index in the load report).
inline constexpr const char* kBackendGpuAnnotation = "gvirtus.io/backend-gpu";
inline constexpr const char* kPropertiesAnnotation = "gvirtus.io/properties";
inline constexpr const char* kBackendStatusAnnotation = "gvirtus.io/backend-status";
inline constexpr const char* kLoadAnnotation = "gvirtus.io/load";
// On backend pods, written by the webhook's leader only: the IPv4s of the pods assigned to
// that backend pod, comma-separated; its shim accepts sessions from these alone.
inline constexpr const char* kPeersAnnotation = "gvirtus.io/peers";
// Beside it, written with it: the GPU memory share of those peers that have one, in MiB
// ("10.244.1.5=4096,10.244.2.7=2048"); the shim gives each pod's process its share as a cap.
inline constexpr const char* kPeerMemoryAnnotation = "gvirtus.io/peer-memory";
inline constexpr const char* kSchedulingGate = "gvirtus.io/backend";
// What the webhook's leader leaves on a GVirtuS pod whose backend went away
// (webhook/follower/follower.h): a pod condition on a pod it cannot recreate (a bare pod),
// and Events: BackendLost (Warning, the bare pod) or BackendLostRecreated (Normal, the pod
// deleted so that its owner creates a new one with a live backend).
inline constexpr const char* kBackendLostCondition = "gvirtus.io/BackendLost";
inline constexpr const char* kBackendLostReason = "BackendLost";
inline constexpr const char* kBackendLostRecreatedReason = "BackendLostRecreated";
inline constexpr const char* kSchedulingMapAnnotation = "gpu-scheduling-map";
// KAI-Scheduler's GPU sharing annotations on a pod: a share of one GPU ("0.5"), or MiB of
// one GPU's memory ("2000"). On a GVirtuS pod they count against the backend's GPU.
inline constexpr const char* kKaiGpuFractionAnnotation = "gpu-fraction";
inline constexpr const char* kKaiGpuMemoryAnnotation = "gpu-memory";

// Resources.
inline constexpr const char* kGpuResource = "nvidia.com/gpu";
// The env the device plugin's Allocate gives a container: its virtual devices, comma list.
inline constexpr const char* kVgpuIdsEnv = "GVIRTUS_VGPU_IDS";

// KAI-Scheduler's binder waits for its GPU reservation pod to write the device it holds
// here (kai-reservation/).
inline constexpr const char* kKaiReservedGpuAnnotation = "run.ai/reserve_for_gpu_index";
inline constexpr const char* kSystemNamespace = "gvirtus-system";

}  // namespace gvirtus::names
