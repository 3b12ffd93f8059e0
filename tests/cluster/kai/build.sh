#!/usr/bin/env bash
# Builds NVIDIA KAI-Scheduler's scheduler, binder, podgrouper and admission webhook from the Go module
# proxy into a cache folder keyed by version, and keeps the module's CRDs beside them.
# `go install ...@version` is refused for this module (the proxy will not list its
# versions here), so it is built inside a writable copy of the downloaded module.
# Prints the cache folder last.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../versions.sh
source "$here/../versions.sh"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-trimpath
log_tag="kai-build"
# shellcheck source=../../lib/log.sh
source "$here/../../lib/log.sh"
# shellcheck source=../build-lib.sh
source "$here/../build-lib.sh"
components=(scheduler binder podgrouper admission)
missing=0
for c in "${components[@]}"; do [ -x "$KAI_CACHE/bin/$c" ] || missing=1; done
if [ "$missing" = 1 ]; then
  start=$SECONDS
  ensure_go
  module=github.com/NVIDIA/KAI-scheduler@$KAI_VERSION
  dir=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$module" | sed -nE 's/^\s*"Dir": "(.*)",?$/\1/p')
  [ -d "$dir" ] || { say "go mod download $module failed"; exit 1; }
  work=$(mktemp -d /tmp/kai-src.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  cp -r "$dir/." "$work" && chmod -R u+w "$work"
  mkdir -p "$KAI_CACHE/bin.tmp"
  (cd "$work" && with_progress "KAI-Scheduler $KAI_VERSION (${components[*]})" \
    go build -mod=mod -ldflags "-s -w" -o "$KAI_CACHE/bin.tmp/" "${components[@]/#/./cmd/}") ||
    exit 1
  rm -rf "$KAI_CACHE/crds" && cp -r "$work/deployments/kai-scheduler/crds" "$KAI_CACHE/crds"
  rm -rf "${KAI_CACHE:?}/bin" && mv "$KAI_CACHE/bin.tmp" "$KAI_CACHE/bin"
  say "built KAI-Scheduler in $((SECONDS - start))s"
fi
echo "$KAI_CACHE"
