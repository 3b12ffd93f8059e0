#!/usr/bin/env bash
# Brings up a GVirtuS-aware local cluster on real nodes and installs GVirtuS the way an
# operator does. The control plane runs on this host (tests/cluster/up.sh --real-nodes);
# four real nodes (kubelet + containerd + kube-proxy, tests/cluster/node/) join it:
#   fe-a, fe-b    GPU-less frontend nodes (zones a and b): the device plugin runs there
#   gpu-a, gpu-b  nodes that count as GPU nodes: nvidia.com/gpu.present=true as NVIDIA's
#                 feature discovery writes it, and the usual nvidia.com/gpu taint
# The project's images are built for the nodes' platform (this machine's) and pushed to
# the local registry (images/build.sh; the backend on the GPU-less GVirtuS stand-in); the
# nodes pull them from it, as a real cluster does (node/add.sh --registry). Then
# `kubectl apply -k` of tests/e2e/overlay, which names the local registry's images.
# Prints `export` lines.
#   real/up.sh NAME
# Environment:
#   E2E_OPT_IN_BACKENDS=false  leaves the GPU nodes opted out (default: in)
#   PLATFORMS                  the images' platforms (default: this machine's only; the
#                              other platforms are make images-test's)
#   E2E_PLUGIN_DIR             also writes the kubectl plugin there, from the same build
#                              (DIR/linux_ARCH/kubectl-gvirtus; images/build.sh --plugin)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
name=${1:?usage: real/up.sh NAME}
opt_in=${E2E_OPT_IN_BACKENDS:-true}
state=$repo/build/e2e/$name
log_tag="real $name"
# shellcheck source=../../lib/log.sh
source "$repo/tests/lib/log.sh"
began=$SECONDS
step() { say "$* (+$((SECONDS - began))s)"; }
mkdir -p "$state/logs"

PLATFORMS=${PLATFORMS:-linux/$(docker version -f '{{.Server.Arch}}')}
export PLATFORMS
plugin_args=()
[ -n "${E2E_PLUGIN_DIR:-}" ] && plugin_args=(--plugin "$E2E_PLUGIN_DIR")
step "images for $PLATFORMS: the four components (backend on the GVirtuS stand-in) and the test app, to the local registry"
if ! bash "$repo/images/build.sh" "${plugin_args[@]}" labeler device-plugin webhook backend kai-reservation \
  testapp 2>"$state/logs/images.log"; then
  tail -n 30 "$state/logs/images.log" >&2
  exit 1
fi
grep -E 'pushed |FAILED|^    ' "$state/logs/images.log" | sed 's/^/    /' >&2 || true
eval "$(bash "$repo/tests/cluster/registry/up.sh" 2>/dev/null)"
# tests/e2e/overlay names the images there.
[ "$LOCAL_REGISTRY" = localhost:5000 ] ||
  { say "FAILED: tests/e2e/overlay expects the local registry at localhost:5000, not $LOCAL_REGISTRY"; exit 1; }
tag=$(sed -nE 's/^project\([^)]*VERSION ([0-9][0-9.]*).*/\1/p' "$repo/CMakeLists.txt")
step "node image"
export NODE_IMAGE
NODE_IMAGE=$(bash "$repo/tests/cluster/node/build.sh")

step "control plane"
env_lines=$(bash "$repo/tests/cluster/up.sh" "$name" --real-nodes)
eval "$env_lines"

step "real nodes fe-a, fe-b (frontends), gpu-a, gpu-b (GPU nodes$([ "$opt_in" = true ] && echo ", opted in"))"
image_args=(--registry "$LOCAL_REGISTRY")
gpu_args=(--label nvidia.com/gpu.present=true --taint nvidia.com/gpu=present:NoSchedule)
[ "$opt_in" = true ] && gpu_args+=(--label gvirtus.io/backend.allowed=true)
: >"$state/logs/nodes.log"
pids=()
add() { bash "$repo/tests/cluster/node/add.sh" "$name" "$@" "${image_args[@]}" >>"$state/logs/nodes.log" 2>&1 & pids+=($!); }
add fe-a --label topology.kubernetes.io/zone=zone-a
add fe-b --label topology.kubernetes.io/zone=zone-b
add gpu-a --label topology.kubernetes.io/zone=zone-a "${gpu_args[@]}"
add gpu-b --label topology.kubernetes.io/zone=zone-b "${gpu_args[@]}"
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
sed 's/^/    /' "$state/logs/nodes.log" | grep -E 'ready in|FAILED|could not' >&2 || true
[ "$failed" = 0 ] || { tail -n 30 "$state/logs/nodes.log" >&2; exit 1; }

step "kubectl apply -k tests/e2e/overlay (manifests/, images from the local registry)"
kubectl apply -k "$repo/tests/e2e/overlay" >"$state/logs/apply.log"

wait_for() { # wait_for DESCRIPTION SECONDS COMMAND...
  local what=$1 seconds=$2
  shift 2
  if ! wait_until "$seconds" "$what" "$@"; then
    say "FAILED: $what"
    kubectl get pods -A -o wide >&2 || true
    exit 1
  fi
  step "$what"
}
labelled() { [ "$(kubectl get nodes -l gvirtus.io/frontend.allowed -o name | wc -l)" -ge 4 ]; }
wait_for "every node labelled by its labeler" 180 labelled
webhook_ready() {
  [ "$(kubectl get deployment gvirtus-webhook -n gvirtus-system -o jsonpath='{.status.availableReplicas}')" = 2 ] &&
    [ -n "$(kubectl get mutatingwebhookconfiguration gvirtus-webhook -o jsonpath='{.webhooks[0].clientConfig.caBundle}')" ]
}
wait_for "webhook: 2 replicas available, its own CA in the caBundle" 180 webhook_ready
capacity() {
  local node
  for node in fe-a fe-b; do
    [ "$(kubectl get node "$node" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 8 ] || return 1
  done
}
wait_for "device plugin: nvidia.com/gpu 8 on fe-a and fe-b (registered with their kubelets)" 120 capacity
if [ "$opt_in" = true ]; then
  loads() {
    [ "$(kubectl get pods -n gvirtus-system -l app.kubernetes.io/component=backend \
      -o jsonpath='{range .items[*]}{.metadata.annotations.gvirtus\.io/load}{"\n"}{end}' |
      grep -c connections)" -ge 2 ]
  }
  wait_for "both backend shims publishing gvirtus.io/load" 180 loads
fi
# Nothing was imported into the nodes: each component's image came from the registry
# (the backend's only where GPU nodes are opted in).
components=3
[ "$opt_in" = true ] && components=4
pulled() {
  [ "$(kubectl get events -A --field-selector reason=Pulled \
    -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' |
    grep -oE "Successfully pulled image \"$LOCAL_REGISTRY/gvirtus-k8s/(labeler|device-plugin|webhook|backend):" |
    sort -u | wc -l)" -ge "$components" ]
}
wait_for "the nodes pulled the components' $components images from the local registry" 30 pulled
step "ready"
echo "$env_lines"
echo "export GVIRTUS_E2E_STATE=$state"
echo "export E2E_TEST_IMAGE=$LOCAL_REGISTRY/gvirtus-k8s/testapp:$tag"
