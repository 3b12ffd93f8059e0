#!/usr/bin/env bash
# Builds sigs.k8s.io/kube-network-policies (the NetworkPolicy agent kind runs) from the Go
# module proxy, unmodified, into a cache folder keyed by version. Prints the binary's
# path last.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../versions.sh
source "$here/../versions.sh"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-trimpath
log_tag="netpol-build"
# shellcheck source=../../lib/log.sh
source "$here/../../lib/log.sh"
# shellcheck source=../build-lib.sh
source "$here/../build-lib.sh"
binary=$KNP_CACHE/bin/kube-network-policies
if ! [ -x "$binary" ]; then
  ensure_go
  build() {
    local gobin
    gobin=$(mktemp -d "$CLUSTER_CACHE/netpol-bin.XXXXXX")
    # The module's main package is its cmd/ folder: `go install` names the binary "cmd".
    GOBIN=$gobin go install -ldflags "-s -w" "sigs.k8s.io/kube-network-policies/cmd@$KNP_VERSION" &&
      mkdir -p "$KNP_CACHE/bin" && mv "$gobin/cmd" "$binary"
    local status=$?
    rm -rf "$gobin"
    return $status
  }
  mkdir -p "$CLUSTER_CACHE"
  with_progress "kube-network-policies $KNP_VERSION" build
fi
echo "$binary"
