#!/usr/bin/env bash
# Builds helm and promtool from the Go module proxy into cache folders keyed by version
# (tests/tools/versions.sh), as tests/cluster/build.sh does for the control plane. Skips
# what is already built. Prints the two binaries' paths last, one per line.
#   build-tools.sh [helm|promtool]...   (default: both)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.sh
source "$here/versions.sh"
# GOTOOLCHAIN=auto: should a tool need a newer Go than the one the control plane's build
# found or installed (1.26), go fetches the toolchain it needs through the module proxy
# (and uses the local one when it is new enough, as on most machines).
export GOTOOLCHAIN=auto GOWORK=off CGO_ENABLED=0 GOFLAGS=-trimpath

log_tag="tools-build"
# shellcheck source=../lib/log.sh
source "$here/../lib/log.sh"
# shellcheck source=../cluster/build-lib.sh
source "$here/../cluster/build-lib.sh"

#   install_tool WHAT TARGET LDFLAGS COMMAND...: COMMAND builds into $out (a temporary
#   folder), then the binary is moved to TARGET: a half-built binary is never cached.
install_tool() {
  local what=$1 target=$2 ldflags="-s -w $3"
  shift 3
  [ -x "$target" ] && return
  local out
  out=$(mktemp -d "$TOOLS_CACHE/.build-XXXXXX")
  if with_progress "$what" env out="$out" ldflags="$ldflags" bash -c "$*"; then
    mkdir -p "$(dirname "$target")"
    mv "$out/$(basename "$target")" "$target"
  fi
  rm -rf "$out"
  [ -x "$target" ]
}

tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(helm promtool)
ensure_go
mkdir -p "$TOOLS_CACHE"
for tool in "${tools[@]}"; do
  case $tool in
    helm)
      # shellcheck disable=SC2016  # $out and $ldflags are install_tool's, expanded there
      # As helm's Makefile links it: its version, and the Kubernetes version it assumes.
      install_tool "helm $HELM_VERSION" "$HELM_BIN" \
        "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION
         -X helm.sh/helm/v3/internal/version.gitTreeState=clean
         -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1
         -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$HELM_K8S_MINOR
         -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1
         -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$HELM_K8S_MINOR" \
        'GOBIN=$out go install -ldflags "$ldflags" helm.sh/helm/v3/cmd/helm@'"$HELM_VERSION" ;;
    promtool)
      # From the wrapper module (Prometheus' go.mod has a replace directive).
      install_tool "promtool $PROMETHEUS_VERSION" "$PROMTOOL_BIN" \
        "-X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION#v}" \
        "cd '$here/modules/promtool' && GOFLAGS=\"-trimpath -mod=mod\" go build -ldflags \"\$ldflags\" -o \"\$out/promtool\" github.com/prometheus/prometheus/cmd/promtool" ;;
    *) say "unknown tool $tool (helm, promtool)"; exit 2 ;;
  esac
done
for tool in "${tools[@]}"; do
  case $tool in
    helm) echo "$HELM_BIN" ;;
    promtool) echo "$PROMTOOL_BIN" ;;
  esac
done
