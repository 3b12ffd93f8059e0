#!/usr/bin/env bash
# Builds the local control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd, kwok, kwokctl) and the real nodes' kubelet and kube-proxy from the Go module proxy into a cache
# folder keyed by version. Skips whatever is already built. Prints the folder last.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.sh
source "$here/versions.sh"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-trimpath

log_tag="cluster-build"
# shellcheck source=../lib/log.sh
source "$here/../lib/log.sh"
# shellcheck source=build-lib.sh
source "$here/build-lib.sh"

ensure_go
mkdir -p "$CLUSTER_BIN"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"

missing() { local b; for b in "$@"; do [ -x "$CLUSTER_BIN/$b" ] || return 0; done; return 1; }

if missing kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy; then
  # One go build for all six: they share most packages. kubelet and kube-proxy run in
  # the real node containers (tests/cluster/node/).
  [ -f "$KUBERNETES_MODULE/go.mod" ] || { say "no wrapper module for Kubernetes $K8S_VERSION" \
    "(tested: $K8S_TESTED_VERSIONS; bash tests/cluster/modules/new-version.sh kubernetes $K8S_VERSION writes one)"; exit 2; }
  (cd "$KUBERNETES_MODULE" && with_progress "kubernetes $K8S_VERSION" \
    go build -ldflags "$ldflags" -o "$CLUSTER_BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy)
fi
if missing etcd; then
  (cd "$ETCD_MODULE" && with_progress "etcd $ETCD_VERSION" \
    go build -ldflags "-s -w" -o "$CLUSTER_BIN/etcd" go.etcd.io/etcd/server/v3)
fi
if missing kwok kwokctl; then
  with_progress "kwok $KWOK_VERSION" env GOBIN="$CLUSTER_BIN" GOFLAGS="$GOFLAGS -ldflags=-s" \
    go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
fi
say "control plane ready in $CLUSTER_BIN"
echo "$CLUSTER_BIN"
