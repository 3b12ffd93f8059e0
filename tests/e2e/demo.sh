#!/usr/bin/env bash
# make demo: a GVirtuS-aware cluster at work on this machine, with no cluster of your own.
# Real kube-apiserver, etcd, scheduler and controllers on this host; four real nodes
# (kubelet + containerd in Docker containers): two GPU-less frontends and two nodes that
# count as GPU nodes; GVirtuS installed with `kubectl apply -k`, every component a real
# pod. The backend image is built on the GPU-less GVirtuS stand-in (an echo server) and
# the application on our frontend stand-in, so no CUDA runs. Leaves it running.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
name=gvirtus-demo
ns=demo
began=$SECONDS
say() { printf '\n\033[1m== %s\033[0m (+%ss)\n' "$*" $((SECONDS - began)); }
die() {
  echo "demo: $*" >&2
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

say "Building the images and starting the control plane, real nodes and GVirtuS (no backend opted in yet)"
env_lines=$(E2E_OPT_IN_BACKENDS=false bash "$repo/tests/e2e/real/up.sh" "$name") ||
  die "bringing the cluster up failed"
eval "$env_lines"
k() { kubectl "$@"; }
k create namespace $ns --dry-run=client -o yaml | k apply -f - >/dev/null
wait_until 60 "default ServiceAccount in $ns" k -n $ns get serviceaccount default

say "Nodes: real kubelets; virtual nvidia.com/gpu advertised by gvirtus-device-plugin on the frontends"
k get nodes -L gvirtus.io/frontend.allowed,gvirtus.io/backend.allowed,nvidia.com/gpu.present,topology.kubernetes.io/zone \
  -o custom-columns='NODE:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,KUBELET:.status.nodeInfo.kubeletVersion,RUNTIME:.status.nodeInfo.containerRuntimeVersion,NVIDIA.COM/GPU:.status.allocatable.nvidia\.com/gpu,FRONTEND:.metadata.labels.gvirtus\.io/frontend\.allowed,BACKEND:.metadata.labels.gvirtus\.io/backend\.allowed,GPU:.metadata.labels.nvidia\.com/gpu\.present'
k -n gvirtus-system get pods -o wide

app_pod() { # app_pod NAME [ANNOTATIONS_JSON]: a GVirtuS application (the frontend stand-in)
  k apply -f - <<YAML 2>&1 | sed 's/^/  /'
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: $ns
  labels: {gvirtus.io/enabled: "true"}
  annotations: ${2:-{\}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: $E2E_TEST_IMAGE
    command: ["gvirtus-frontend-standin"]
    env: [{name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
YAML
}

say "A GVirtuS pod created while no backend runs waits, Pending, behind a scheduling gate"
app_pod early-bird
k -n $ns get pod early-bird -o \
  custom-columns='POD:.metadata.name,STATUS:.status.phase,GATE:.spec.schedulingGates[*].name,BACKEND-STATUS:.metadata.annotations.gvirtus\.io/backend-status'

say "The operator opts the GPU nodes in as backends; the backend DaemonSet and shims start"
k label node gpu-a gpu-b gvirtus.io/backend.allowed=true --overwrite
loads() {
  [ "$(k get pods -n gvirtus-system -l app.kubernetes.io/component=backend \
    -o jsonpath='{range .items[*]}{.metadata.annotations.gvirtus\.io/load}{"\n"}{end}' |
    grep -c connections)" = 2 ]
}
wait_until 120 "two backends publishing their load" loads
released() { [ -z "$(k -n $ns get pod early-bird -o jsonpath='{.spec.schedulingGates}')" ]; }
wait_until 60 "the waiting pod released by the webhook's controller" released
wait_until 60 "early-bird running" k -n $ns wait --for=condition=Ready pod/early-bird --timeout=1s
first_running=$((SECONDS - began))
k -n $ns get events --field-selector involvedObject.name=early-bird -o custom-columns='REASON:.reason,FROM:.source.component,MESSAGE:.message'

say "early-bird's log: its own /etc/gvirtus/properties.json, and a TCP connection to that backend"
connected() { k -n $ns logs early-bird | grep -q "backend answered"; }
wait_until 30 "early-bird connected" connected
k -n $ns logs early-bird | sed 's/^/  /'

say "The backend counts that connection (gvirtus.io/load, written by gvirtus-backend-shim from its pod)"
backend_pod=$(k -n $ns get pod early-bird -o jsonpath='{.metadata.annotations.gvirtus\.io/backend-pod}')
counted() { k -n "${backend_pod%/*}" get pod "${backend_pod#*/}" -o jsonpath='{.metadata.annotations.gvirtus\.io/load}' | grep -qE '"connections":[1-9]'; }
wait_until 60 "the connection counted" counted
k -n gvirtus-system get pods -l app.kubernetes.io/component=backend \
  -o custom-columns='BACKEND:.metadata.name,NODE:.spec.nodeName,IP:.status.podIP,LOAD:.metadata.annotations.gvirtus\.io/load'

say "More GVirtuS pods: each gets one backend pod's IP, spread by least-connections"
for p in train-1 train-2 train-3; do app_pod $p; done
app_pod big-model '{"gvirtus.io/gpu-memory": "1Ti"}'
wait_until 60 "GVirtuS pods running" k -n $ns wait --for=condition=Ready pod/train-1 pod/train-2 pod/train-3 --timeout=1s
k -n $ns get pods -l gvirtus.io/enabled=true \
  -o custom-columns='POD:.metadata.name,PHASE:.status.phase,NODE:.spec.nodeName,BACKEND:.metadata.annotations.gvirtus\.io/backend,STATUS:.metadata.annotations.gvirtus\.io/backend-status'
say "Why big-model still waits"
k -n $ns get events --field-selector involvedObject.name=big-model -o custom-columns='REASON:.reason,MESSAGE:.message'

say "The operator's view: kubectl gvirtus (a kubectl plugin, build/bin/kubectl-gvirtus)"
export PATH=$repo/build/bin:$PATH
echo "\$ kubectl gvirtus status"
k gvirtus status | sed 's/^/  /'
echo "\$ kubectl gvirtus why big-model -n $ns"
k gvirtus why big-model -n $ns | sed 's/^/  /'

say "A pod asking nvidia.com/gpu: 2 gets two virtual devices, their CDI spec applied by containerd"
k apply -f - <<YAML | sed 's/^/  /'
apiVersion: v1
kind: Pod
metadata: {name: two-gpus, namespace: $ns}
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: app
    image: $E2E_TEST_IMAGE
    command: ["sh", "-c", "env | grep ^GVIRTUS_ | sort; sleep 3600"]
    resources: {limits: {nvidia.com/gpu: 2}}
YAML
wait_until 60 "two-gpus running" k -n $ns wait --for=condition=Ready pod/two-gpus --timeout=1s
sleep 1
k -n $ns logs two-gpus | sed 's/^/  /'

say "A StatefulSet with gpu-scheduling-map: pod N pinned to a node and its GPUs; each prints where it runs"
k apply -f - <<YAML | sed 's/^/  /'
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: mapped, namespace: $ns}
spec:
  replicas: 3
  podManagementPolicy: Parallel
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
      terminationGracePeriodSeconds: 1
      containers:
      - name: app
        image: $E2E_TEST_IMAGE
        command: ["sh", "-c", "echo \"\$(hostname) on node \$NODE_NAME: CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES\"; sleep 3600"]
        env: [{name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
YAML
mapped_ready() { [ "$(k -n $ns get pods -l app=mapped --field-selector=status.phase=Running -o name | wc -l)" = 3 ]; }
wait_until 90 "the mapped StatefulSet running" mapped_ready
sleep 1
for i in 0 1 2; do k -n $ns logs "mapped-$i" | sed 's/^/  /'; done

say "Done: the first GVirtuS pod was Running ${first_running}s after the start. The cluster stays up:"
echo "  export KUBECONFIG=$KUBECONFIG PATH=$GVIRTUS_CLUSTER_BIN:\$PATH"
echo "  kubectl get pods -A -o wide"
echo "  docker ps --filter label=gvirtus.io/cluster=$name    # the real nodes"
echo "Stop everything with: make demo-down"
