# shellcheck shell=bash disable=SC2034  # sourced: its variables are for the sourcing script
# Versions of the local clusters; every cache folder is keyed by them.
# K8S_VERSION picks the release the control plane, kubelet and kube-proxy are built from:
# the newest tested by default, the oldest supported with K8S_VERSION=v1.35.4. Each has
# its wrapper module in tests/cluster/modules/kubernetes/VERSION (new-version.sh writes
# one for another release).
K8S_VERSION=${K8S_VERSION:-v1.37.2}
K8S_TESTED_VERSIONS="v1.37.2 v1.35.4"
# One etcd for every tested release: 3.6 is supported by 1.35 through 1.37.
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.7.0
# Go toolchain used when the machine has none (fetched as a module, see build-lib.sh);
# k8s.io/kubernetes v1.37 declares go 1.26.
GO_MIN_MINOR=26
GO_FALLBACK_VERSION=1.26.8
CLUSTER_CACHE=${GVIRTUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gvirtus}
CLUSTER_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KUBERNETES_MODULE=$CLUSTER_SCRIPTS/modules/kubernetes/$K8S_VERSION
ETCD_MODULE=$CLUSTER_SCRIPTS/modules/etcd/$ETCD_VERSION
CLUSTER_BIN=$CLUSTER_CACHE/control-plane/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION/bin
# Real nodes (tests/cluster/node/): containerd 2.x has CDI on by default.
CONTAINERD_VERSION=v2.2.9
NODE_CACHE=$CLUSTER_CACHE/node/containerd-$CONTAINERD_VERSION
# NVIDIA KAI-Scheduler (tests/cluster/kai/): the newest version the module proxy serves
# here (newer tags are refused), built with its own k8s libraries (0.34).
KAI_VERSION=v0.12.0
KAI_CACHE=$CLUSTER_CACHE/kai/$KAI_VERSION
# Multi-arch images (tests/cluster/registry/): a local registry, a BuildKit daemon and the
# buildx CLI plugin, all from the module proxy.
REGISTRY_VERSION=v3.0.0
BUILDKIT_VERSION=v0.34.2
BUILDX_VERSION=v0.38.2
IMAGE_TOOLS_CACHE=$CLUSTER_CACHE/image-tools/registry-$REGISTRY_VERSION-buildkit-$BUILDKIT_VERSION-buildx-$BUILDX_VERSION
# The NetworkPolicy agent on the real nodes (tests/cluster/netpol/): the one kind uses.
KNP_VERSION=v0.8.0
KNP_CACHE=$CLUSTER_CACHE/netpol/kube-network-policies-$KNP_VERSION
