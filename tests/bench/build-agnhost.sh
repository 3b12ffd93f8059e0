#!/usr/bin/env bash
# Builds agnhost (k8s.io/kubernetes/test/images/agnhost, the Kubernetes project's own test
# image binary) from the Go module proxy through the wrapper module in tests/bench/agnhost,
# into a cache folder keyed by version. Skips the build when the binary is there. Prints the
# binary's path last, on stdout.
#   build-agnhost.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../cluster/versions.sh
source "$here/../cluster/versions.sh"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-trimpath

log_tag="bench agnhost"
# shellcheck source=../lib/log.sh
source "$here/../lib/log.sh"

# The version the wrapper module pins must be the control plane's.
pinned=$(sed -nE 's/^\s*k8s\.io\/kubernetes (v[0-9.]+)( \/\/ indirect)?$/\1/p' "$here/agnhost/go.mod")
if [ "$pinned" != "$K8S_VERSION" ]; then
  say "tests/bench/agnhost/go.mod pins k8s.io/kubernetes $pinned, versions.sh says $K8S_VERSION"
  exit 1
fi
out_dir=$CLUSTER_CACHE/bench/agnhost-$K8S_VERSION
binary=$out_dir/agnhost
if [ -x "$binary" ]; then
  echo "$binary"
  exit 0
fi

# A Go of at least 1.$GO_MIN_MINOR: the one on PATH, /usr/local/go, or the one tests/cluster/build.sh
# installed into the cache (run it first on a machine without Go).
go_bin=
for candidate in "$(command -v go || true)" /usr/local/go/bin/go "$CLUSTER_CACHE/go/bin/go"; do
  [ -x "$candidate" ] || continue
  minor=$("$candidate" env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
  if [ "${minor:-0}" -ge "$GO_MIN_MINOR" ]; then go_bin=$candidate; break; fi
done
if [ -z "$go_bin" ]; then
  say "no Go >= 1.$GO_MIN_MINOR: run tests/cluster/build.sh (make cluster-build) first, it installs one"
  exit 1
fi

mkdir -p "$out_dir"
say "building agnhost $K8S_VERSION with $("$go_bin" env GOVERSION) (a few minutes cold) ..."
start=$SECONDS
(cd "$here/agnhost" && "$go_bin" build -ldflags "-s -w -X main.Version=$K8S_VERSION" \
  -o "$binary.tmp" k8s.io/kubernetes/test/images/agnhost)
mv "$binary.tmp" "$binary"
say "built $binary in $((SECONDS - start))s"
echo "$binary"
