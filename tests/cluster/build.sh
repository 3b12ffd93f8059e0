#!/usr/bin/env bash
# Builds the local control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd, kwok, kwokctl) from the Go module proxy into a cache
# folder keyed by version. Skips whatever is already built. Prints the folder last.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.sh"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-trimpath

say() { printf '[cluster-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# Finds a Go of at least 1.24, installing one when none is there: Debian's golang-go is
# older, so it only serves to fetch the toolchain module through the module proxy.
ensure_go() {
  local go_bin
  for go_bin in "$(command -v go || true)" /usr/local/go/bin/go "$CLUSTER_CACHE/go/bin/go"; do
    [ -x "$go_bin" ] || continue
    local minor
    minor=$("$go_bin" env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
    if [ "${minor:-0}" -ge 24 ]; then
      export PATH=$(dirname "$go_bin"):$PATH
      return
    fi
  done
  say "no Go >= 1.24 found; installing Debian's golang-go to fetch go$GO_FALLBACK_VERSION"
  command -v /usr/lib/go/bin/go >/dev/null 2>&1 || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null
  }
  local mod="golang.org/toolchain@v0.0.1-go$GO_FALLBACK_VERSION.linux-$(dpkg --print-architecture)"
  local dir
  dir=$(cd /tmp && GOFLAGS=-mod=mod /usr/lib/go/bin/go mod download -json "$mod" |
    sed -nE 's/^\s*"Dir": "(.*)",?$/\1/p')
  rm -rf "$CLUSTER_CACHE/go" && mkdir -p "$CLUSTER_CACHE" && cp -r "$dir/go" "$CLUSTER_CACHE/go"
  chmod -R u+w "$CLUSTER_CACHE/go"
  export PATH=$CLUSTER_CACHE/go/bin:$PATH
}

# Runs a minutes-long step with a heartbeat so that logs show it is alive.
with_progress() {
  local what=$1; shift
  local start=$SECONDS
  say "building $what ..."
  "$@" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 30
    kill -0 "$pid" 2>/dev/null && say "  still building $what ($((SECONDS - start))s)"
  done
  wait "$pid" || { say "FAILED building $what"; return 1; }
  say "built $what in $((SECONDS - start))s"
}

ensure_go
mkdir -p "$CLUSTER_BIN"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"

missing() { local b; for b in "$@"; do [ -x "$CLUSTER_BIN/$b" ] || return 0; done; return 1; }

if missing kube-apiserver kube-controller-manager kube-scheduler kubectl; then
  # One go build for all four: they share most packages.
  (cd "$here/modules/kubernetes" && with_progress "kubernetes $K8S_VERSION" \
    go build -ldflags "$ldflags" -o "$CLUSTER_BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
fi
if missing etcd; then
  (cd "$here/modules/etcd" && with_progress "etcd $ETCD_VERSION" \
    go build -ldflags "-s -w" -o "$CLUSTER_BIN/etcd" go.etcd.io/etcd/server/v3)
fi
if missing kwok kwokctl; then
  with_progress "kwok $KWOK_VERSION" env GOBIN="$CLUSTER_BIN" GOFLAGS="$GOFLAGS -ldflags=-s" \
    go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
fi
say "control plane ready in $CLUSTER_BIN"
echo "$CLUSTER_BIN"
