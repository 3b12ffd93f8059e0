#!/usr/bin/env bash
# make demo: a GVirtuS-aware cluster at work on this machine, with no cluster of your own.
# Real kube-apiserver, etcd, scheduler and controllers; kwok nodes; our four components
# doing each pod's work as host processes (tests/e2e/local/). Leaves it running.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
name=gvirtus-demo
ns=demo
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
die() {
  echo "demo: $*" >&2
  [ -n "${GVIRTUS_E2E_STATE:-}" ] && tail -n 15 "$GVIRTUS_E2E_STATE"/logs/*.log >&2
  echo "demo: stop it with: make demo-down" >&2
  exit 1
}
wait_until() { # wait_until SECONDS DESCRIPTION COMMAND...
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "timed out: $what"
    sleep 1
  done
}

say "Starting the local control plane and GVirtuS (no backend opted in yet)"
env_lines=$(E2E_OPT_IN_BACKENDS=false bash "$repo/tests/e2e/local/local-up.sh" "$name") ||
  die "bringing the cluster up failed"
eval "$env_lines"
k() { kubectl "$@"; }
k create namespace $ns --dry-run=client -o yaml | k apply -f - >/dev/null
wait_until 60 "default ServiceAccount in $ns" k -n $ns get serviceaccount default

gvirtus_pod() { # gvirtus_pod NAME [ANNOTATIONS_JSON]
  k apply -f - <<YAML 2>&1 | sed 's/^/  /'
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: $ns
  labels: {gvirtus.io/enabled: "true"}
  annotations: ${2:-{\}}
spec:
  containers:
  - name: app
    image: nvidia/cuda:12.4.1-base-ubuntu22.04
    command: ["./my-cuda-app"]
YAML
}

say "A GVirtuS pod created while no backend runs waits, Pending, behind a scheduling gate"
gvirtus_pod early-bird
k -n $ns get pod early-bird -o \
  custom-columns='POD:.metadata.name,STATUS:.status.phase,GATE:.spec.schedulingGates[*].name,BACKEND-STATUS:.metadata.annotations.gvirtus\.io/backend-status'

say "The operator opts the GPU nodes in as backends; the backend DaemonSet and shims start"
k label node gpu-a gpu-b gvirtus.io/backend.allowed=true --overwrite
loads() {
  [ "$(k get pods -n gvirtus-system -l app.kubernetes.io/component=backend \
    -o jsonpath='{range .items[*]}{.metadata.annotations.gvirtus\.io/load}{"\n"}{end}' |
    grep -c connections)" = 2 ]
}
wait_until 60 "two backends publishing their load" loads
released() { [ -z "$(k -n $ns get pod early-bird -o jsonpath='{.spec.schedulingGates}')" ]; }
wait_until 60 "the waiting pod released by the webhook's controller" released
wait_until 30 "early-bird running" k -n $ns wait --for=condition=Ready pod/early-bird --timeout=1s

say "More GVirtuS pods: each gets one backend pod's IP, spread by least-connections"
for p in train-1 train-2 train-3; do gvirtus_pod $p; done
gvirtus_pod big-model '{"gvirtus.io/gpu-memory": "1Ti"}'

say "A StatefulSet with gpu-scheduling-map: pod N pinned to a node and its GPUs"
k apply -f - <<'YAML' | sed 's/^/  /'
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: mapped, namespace: demo}
spec:
  replicas: 3
  serviceName: mapped
  selector: {matchLabels: {app: mapped}}
  template:
    metadata:
      labels: {app: mapped}
      annotations:
        gpu-scheduling-map: |
          0=fe-a:0,1
          1=fe-b:2
          2=fe-a:3
    spec:
      containers: [{name: app, image: busybox:1.36, command: ["sleep", "infinity"]}]
YAML
mapped_ready() { [ "$(k -n $ns get pods -l app=mapped --field-selector=status.phase=Running -o name | wc -l)" = 3 ]; }
wait_until 60 "the mapped StatefulSet running" mapped_ready
wait_until 30 "GVirtuS pods running" k -n $ns wait --for=condition=Ready pod/train-1 pod/train-2 pod/train-3 --timeout=1s

say "Nodes and their GVirtuS roles (written by gvirtus-labeler)"
k get nodes -L gvirtus.io/frontend.allowed,gvirtus.io/backend.allowed,gvirtus.io/gpu.present,topology.kubernetes.io/zone
say "Backends and their load (published by gvirtus-backend-shim)"
k -n gvirtus-system get pods -l app.kubernetes.io/component=backend \
  -o custom-columns='BACKEND:.metadata.name,NODE:.spec.nodeName,IP:.status.podIP,LOAD:.metadata.annotations.gvirtus\.io/load'
say "GVirtuS pods, their node and their backend (chosen by gvirtus-webhook)"
k -n $ns get pods -l gvirtus.io/enabled=true \
  -o custom-columns='POD:.metadata.name,PHASE:.status.phase,NODE:.spec.nodeName,BACKEND:.metadata.annotations.gvirtus\.io/backend,STATUS:.metadata.annotations.gvirtus\.io/backend-status'
say "train-1's /etc/gvirtus/properties.json (projected from its annotation)"
k -n $ns get pod train-1 -o jsonpath='{.metadata.annotations.gvirtus\.io/properties}'
echo
say "The pod that waited, and why big-model still waits"
k -n $ns get events --field-selector involvedObject.name=early-bird -o custom-columns='REASON:.reason,MESSAGE:.message' 2>/dev/null || true
k -n $ns get events --field-selector involvedObject.name=big-model -o custom-columns='REASON:.reason,MESSAGE:.message' 2>/dev/null || true
say "gpu-scheduling-map placement"
k -n $ns get pods -l app=mapped -o custom-columns='POD:.metadata.name,NODE:.spec.nodeName,CUDA_VISIBLE_DEVICES:.spec.containers[0].env[?(@.name=="CUDA_VISIBLE_DEVICES")].value'

say "The cluster stays up. Explore it with:"
echo "  export KUBECONFIG=$KUBECONFIG PATH=$GVIRTUS_CLUSTER_BIN:\$PATH"
echo "  kubectl get pods -A -o wide"
echo "Component logs: $GVIRTUS_E2E_STATE/logs/. Stop everything with: make demo-down"
