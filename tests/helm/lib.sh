# shellcheck shell=bash disable=SC2034  # sourced: its variables are for the sourcing script
# Shared by the chart tests (sourced): helm from tests/tools/build-tools.sh, kubectl from
# the control plane's cache or PATH, the objdiff comparer built with Go into the build tree.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../tools/versions.sh
source "$repo/tests/tools/versions.sh"
chart=$repo/charts/gvirtus
build=${GVIRTUS_BUILD_DIR:-$repo/build}
# shellcheck source=../lib/checks.sh
source "$repo/tests/lib/checks.sh"

[ -x "$HELM_BIN" ] || { echo "FAIL: $HELM_BIN missing: run bash tests/tools/build-tools.sh helm (make tools)" >&2; exit 1; }
helm() { "$HELM_BIN" "$@"; }
# Helm keeps its caches and configuration away from the user's.
export HELM_CACHE_HOME=$build/helm/cache HELM_CONFIG_HOME=$build/helm/config HELM_DATA_HOME=$build/helm/data
[ -n "${GVIRTUS_CLUSTER_BIN:-}" ] && export PATH=$GVIRTUS_CLUSTER_BIN:$PATH
[ -x "$CLUSTER_BIN/kubectl" ] && export PATH=$PATH:$CLUSTER_BIN
command -v kubectl >/dev/null || { echo "FAIL: no kubectl (make cluster-build)" >&2; exit 1; }

# objdiff EXPECTED ACTUAL: semantic comparison of two streams of objects (tests/helm/objdiff).
objdiff_bin=$build/tests/objdiff
objdiff() {
  if [ ! -x "$objdiff_bin" ] || [ "$repo/tests/helm/objdiff/main.go" -nt "$objdiff_bin" ]; then
    local go_bin
    for go_bin in "$(command -v go || true)" /usr/local/go/bin/go "$CLUSTER_CACHE/go/bin/go"; do
      [ -x "$go_bin" ] && break
    done
    [ -x "$go_bin" ] || { echo "FAIL: no Go to build objdiff (make cluster-build installs one)" >&2; return 2; }
    mkdir -p "$(dirname "$objdiff_bin")"
    (cd "$repo/tests/helm/objdiff" && GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod \
      "$go_bin" build -o "$objdiff_bin" .) || return 2
  fi
  "$objdiff_bin" "$@"
}
