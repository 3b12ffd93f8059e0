#!/usr/bin/env bash
# Builds what multi-arch images need here, from the Go module proxy, into a cache folder
# keyed by their versions: the CNCF distribution registry, the BuildKit daemon and its
# client (buildkitd, buildctl) and the docker buildx CLI plugin. Static binaries (no
# cgo). Each module is built inside a writable copy of it (BuildKit's go.mod has an
# `exclude` block, which `go install ...@version` refuses). Prints the cache folder last.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../versions.sh
source "$here/../versions.sh"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-trimpath
log_tag="image-tools"
# shellcheck source=../../lib/log.sh
source "$here/../../lib/log.sh"
# shellcheck source=../build-lib.sh
source "$here/../build-lib.sh"

# build_module MODULE@VERSION PACKAGE... : builds the packages into $IMAGE_TOOLS_CACHE/bin.
build_module() {
  local module=$1 dir work
  shift
  dir=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$module" | sed -nE 's/^\s*"Dir": "(.*)",?$/\1/p')
  [ -d "$dir" ] || { say "go mod download $module failed"; return 1; }
  work=$(mktemp -d /tmp/image-tools-src.XXXXXX)
  cp -r "$dir/." "$work" && chmod -R u+w "$work" && rm -rf "$work/vendor"
  local version=${module#*@}
  (cd "$work" && with_progress "$module ($*)" go build -mod=mod \
    -ldflags "-s -w -X github.com/moby/buildkit/version.Version=$version -X github.com/docker/buildx/version.Version=$version -X github.com/distribution/distribution/v3/version.version=$version" \
    -o "$IMAGE_TOOLS_CACHE/bin.tmp/" "$@") || { rm -rf "$work"; return 1; }
  rm -rf "$work"
}

tools=(registry buildkitd buildctl docker-buildx)
missing=0
for tool in "${tools[@]}"; do [ -x "$IMAGE_TOOLS_CACHE/bin/$tool" ] || missing=1; done
if [ "$missing" = 1 ]; then
  start=$SECONDS
  ensure_go
  rm -rf "$IMAGE_TOOLS_CACHE/bin.tmp" && mkdir -p "$IMAGE_TOOLS_CACHE/bin.tmp"
  build_module "github.com/distribution/distribution/v3@$REGISTRY_VERSION" ./cmd/registry
  build_module "github.com/moby/buildkit@$BUILDKIT_VERSION" ./cmd/buildkitd ./cmd/buildctl
  build_module "github.com/docker/buildx@$BUILDX_VERSION" ./cmd/buildx
  mv "$IMAGE_TOOLS_CACHE/bin.tmp/buildx" "$IMAGE_TOOLS_CACHE/bin.tmp/docker-buildx"
  rm -rf "${IMAGE_TOOLS_CACHE:?}/bin" && mv "$IMAGE_TOOLS_CACHE/bin.tmp" "$IMAGE_TOOLS_CACHE/bin"
  say "built registry, buildkitd, buildctl, docker-buildx in $((SECONDS - start))s"
fi
echo "$IMAGE_TOOLS_CACHE"
