# Versions of the local control plane; the cache folder is keyed by them.
K8S_VERSION=v1.33.13
K8S_STAGING_VERSION=v0.33.13
ETCD_VERSION=v3.5.21
KWOK_VERSION=v0.7.0
# Go toolchain used when the machine has none (fetched as a module, see build.sh).
GO_FALLBACK_VERSION=1.24.6
CLUSTER_CACHE=${GVIRTUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gvirtus}
CLUSTER_BIN=$CLUSTER_CACHE/control-plane/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION/bin
# Real nodes (tests/cluster/node/): containerd 2.x has CDI on by default.
CONTAINERD_VERSION=v2.1.4
NODE_CACHE=$CLUSTER_CACHE/node/containerd-$CONTAINERD_VERSION
# NVIDIA KAI-Scheduler (tests/cluster/kai/): the newest version the module proxy serves here.
KAI_VERSION=v0.12.0
KAI_CACHE=$CLUSTER_CACHE/kai/$KAI_VERSION
# Multi-arch images (tests/cluster/registry/): a local registry, a BuildKit daemon and the
# buildx CLI plugin, all from the module proxy.
REGISTRY_VERSION=v3.0.0
BUILDKIT_VERSION=v0.34.2
BUILDX_VERSION=v0.38.2
IMAGE_TOOLS_CACHE=$CLUSTER_CACHE/image-tools/registry-$REGISTRY_VERSION-buildkit-$BUILDKIT_VERSION-buildx-$BUILDX_VERSION
