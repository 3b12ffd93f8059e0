#!/usr/bin/env bash
# Builds what a real node container needs beyond the control plane's kubelet and
# kube-proxy (tests/cluster/build.sh): containerd 2.x with its runc shim and ctr, from
# the Go module proxy, cached by version; then the node image itself (Dockerfile beside
# this script) on the project's Debian base image, tagged by a hash of its inputs so an
# unchanged image is not rebuilt. Prints the image name last.
#   node/build.sh [--binaries-only]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
# shellcheck source=../versions.sh
source "$here/../versions.sh"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-trimpath

log_tag="node-build"
# shellcheck source=../../lib/log.sh
source "$repo/tests/lib/log.sh"

# shellcheck source=../build-lib.sh
source "$here/../build-lib.sh"
ensure_go

# containerd's go.mod has an exclude block, which `go install pkg@version` refuses; so
# it is built inside a writable copy of the downloaded module (without its vendor/).
build_containerd() {
  local module=github.com/containerd/containerd/v2@$CONTAINERD_VERSION dir work
  dir=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$module" |
    sed -nE 's/^\s*"Dir": "(.*)",?$/\1/p')
  [ -d "$dir" ] || { say "go mod download $module failed"; return 1; }
  work=$(mktemp -d /tmp/containerd-src.XXXXXX)
  cp -r "$dir/." "$work" && chmod -R u+w "$work" && rm -rf "$work/vendor"
  mkdir -p "$NODE_CACHE/bin.tmp"
  (cd "$work" && go build -mod=mod -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
    -o "$NODE_CACHE/bin.tmp/" ./cmd/containerd ./cmd/ctr ./cmd/containerd-shim-runc-v2)
  local status=$?
  rm -rf "$work"
  [ $status = 0 ] || return $status
  rm -rf "${NODE_CACHE:?}/bin" && mv "$NODE_CACHE/bin.tmp" "$NODE_CACHE/bin"
}

if ! [ -x "$NODE_CACHE/bin/containerd" ] || ! [ -x "$NODE_CACHE/bin/containerd-shim-runc-v2" ]; then
  with_progress "containerd $CONTAINERD_VERSION" build_containerd
fi
say "containerd ready in $NODE_CACHE/bin"
[ "${1:-}" = --binaries-only ] && exit 0

# --- The node image ------------------------------------------------------------------
for b in kubelet kube-proxy; do
  [ -x "$CLUSTER_BIN/$b" ] || { say "missing $CLUSTER_BIN/$b: run tests/cluster/build.sh"; exit 1; }
done
base_image=${BASE_IMAGE:-debian:bookworm-slim}
bash "$repo/images/make-base-image.sh" "$base_image" 2>/dev/null
# Tagged by what goes in: this folder's files and the versions of the binaries.
inputs=$(cd "$here" && cat Dockerfile containerd.toml node-entrypoint.sh pause.c &&
  echo "$K8S_VERSION $CONTAINERD_VERSION $base_image $(docker image inspect -f '{{.Id}}' "$base_image")")
image=gvirtus-k8s/node:$K8S_VERSION-$(sha256sum <<<"$inputs" | cut -c1-12)
if docker image inspect "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi
start=$SECONDS
say "building the node image $image ..."
context=$(mktemp -d /tmp/gvirtus-node.XXXXXX)
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/bin" "$context/images" "$context/pause"
cp "$CLUSTER_BIN/kubelet" "$CLUSTER_BIN/kube-proxy" "$NODE_CACHE/bin/"* "$context/bin/"
cp "$here/Dockerfile" "$here/containerd.toml" "$here/node-entrypoint.sh" "$context/"
# The pod sandbox image, made here (no registry): one static program.
gcc -static -O2 -o "$context/pause/pause" "$here/pause.c"
tar -C "$context/pause" -c pause |
  docker import --change 'ENTRYPOINT ["/pause"]' --change 'USER 65535:65535' - gvirtus-k8s/pause:3.10 >/dev/null
docker save gvirtus-k8s/pause:3.10 -o "$context/images/pause.tar"
docker buildx version >/dev/null 2>&1 && export DOCKER_BUILDKIT=1 || export DOCKER_BUILDKIT=0
if ! docker build -q --build-arg "BASE_IMAGE=$base_image" -t "$image" "$context" >"$context/build.log" 2>&1; then
  tail -20 "$context/build.log" >&2
  say "FAILED building the node image"
  exit 1
fi
say "built $image ($(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec)) in $((SECONDS - start))s"
echo "$image"
