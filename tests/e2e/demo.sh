#!/usr/bin/env bash
# make demo: a GVirtuS-aware cluster at work on this machine, with no cluster of your own.
# Real kube-apiserver, etcd, scheduler and controllers on this host; four real nodes
# (kubelet + containerd in Docker containers): two GPU-less frontends and two nodes that
# count as GPU nodes; GVirtuS installed with `kubectl apply -k`, every component a real
# pod. The backend image is built on the GPU-less GVirtuS stand-in (an echo server) and
# the application on our frontend stand-in, so no CUDA runs. Leaves it running.
# It builds only what it runs: the control plane and the nodes (cached by version) and
# the images for this machine's platform, the kubectl plugin from the same image build.
#   tests/e2e/demo.sh [--check]
# --check (make demo-test, part of make test): the same story, every step asserted, then
# the commands the demo suggests are run as shown, and the cluster is stopped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
check=0
case ${1:-} in
  "") ;;
  --check) check=1 ;;
  *) echo "demo.sh: unknown argument \"$1\" (usage: demo.sh [--check])" >&2; exit 2 ;;
esac
# The check's cluster is its own: a demo the user left running is not touched.
name=gvirtus-demo
[ "$check" = 0 ] || name=gvirtus-demo-check
ns=demo
began=$SECONDS
say() { printf '\n\033[1m== %s\033[0m (+%ss)\n' "$*" $((SECONDS - began)); }
die() {
  echo "demo: $*" >&2
  [ "$check" = 1 ] || echo "demo: stop it with: make demo-down" >&2
  exit 1
}
# The check stops the cluster however it ends; the demo leaves it running.
[ "$check" = 0 ] || trap 'bash "$repo/tests/e2e/real/down.sh" "$name" >/dev/null 2>&1' EXIT
wait_until() { # wait_until SECONDS DESCRIPTION COMMAND...
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "timed out: $what"
    sleep 1
  done
}
expect() { # expect DESCRIPTION COMMAND...: a fact the story has just shown
  local what=$1
  shift
  "$@" >/dev/null 2>&1 || die "expected: $what"
}

say "Building the images and starting the control plane, real nodes and GVirtuS (no backend opted in yet)"
plugin_dir=$repo/build/demo/plugin
env_lines=$(E2E_OPT_IN_BACKENDS=false E2E_PLUGIN_DIR=$plugin_dir bash "$repo/tests/e2e/real/up.sh" "$name") ||
  die "bringing the cluster up failed"
eval "$env_lines"
k() { kubectl "$@"; }
k create namespace $ns --dry-run=client -o yaml | k apply -f - >/dev/null
wait_until 60 "default ServiceAccount in $ns" k -n $ns get serviceaccount default

say "Nodes: real kubelets; virtual nvidia.com/gpu advertised by gvirtus-device-plugin on the frontends"
# The labels are columns of their own: kubectl 1.37 takes no label-column flag with this printer.
k get nodes -o custom-columns='NODE:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,KUBELET:.status.nodeInfo.kubeletVersion,RUNTIME:.status.nodeInfo.containerRuntimeVersion,ZONE:.metadata.labels.topology\.kubernetes\.io/zone,NVIDIA.COM/GPU:.status.allocatable.nvidia\.com/gpu,FRONTEND:.metadata.labels.gvirtus\.io/frontend\.allowed,BACKEND:.metadata.labels.gvirtus\.io/backend\.allowed,GPU:.metadata.labels.nvidia\.com/gpu\.present'
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
gated() { [ -n "$(k -n $ns get pod "$1" -o jsonpath='{.spec.schedulingGates}')" ]; }
expect "early-bird held behind its scheduling gate" gated early-bird
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
expect "big-model still held behind its gate (no backend has 1Ti)" gated big-model
k -n $ns get events --field-selector involvedObject.name=big-model -o custom-columns='REASON:.reason,MESSAGE:.message'

# From the same image build as the components, for this machine (images/build.sh --plugin).
plugin_bin=$plugin_dir/linux_$(docker version -f '{{.Server.Arch}}')
say "The operator's view: kubectl gvirtus (the kubectl plugin, ${plugin_bin#"$repo"/})"
export PATH=$plugin_bin:$PATH
echo "\$ kubectl gvirtus status"
k gvirtus status | sed 's/^/  /'
echo "\$ kubectl gvirtus why big-model -n $ns"
why=$(k gvirtus why big-model -n $ns)
sed 's/^/  /' <<<"$why"
[ -n "$why" ] || die "kubectl gvirtus why big-model printed nothing"

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
logged() { k -n $ns logs "$1" | grep -qE "$2"; }
wait_until 30 "two-gpus printing its GVIRTUS_ variables" logged two-gpus '^GVIRTUS_'
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
# The map's promise, pod by pod: its node and its devices.
for entry in 0=fe-a=0,1 1=fe-b=2 2=fe-a=3; do
  IFS='=' read -r i node devices <<<"$entry"
  wait_until 30 "mapped-$i printing where it runs" logged "mapped-$i" "on node $node: CUDA_VISIBLE_DEVICES=$devices\$"
  k -n $ns logs "mapped-$i" | sed 's/^/  /'
done

say "Done: the first GVirtuS pod was Running ${first_running}s after the start. The cluster stays up."
# Each suggestion is run as shown by the check (demo-test), with the test bed's kubectl.
next_steps=(
  "kubectl gvirtus backends"
  "kubectl -n $ns logs train-1"
  "kubectl -n $ns get pods -o wide"
)
echo "In this shell's environment:"
echo "  export KUBECONFIG=$KUBECONFIG PATH=$plugin_bin:$GVIRTUS_CLUSTER_BIN:\$PATH"
echo "Try next:"
for step in "${next_steps[@]}"; do echo "  $step"; done
echo "The real nodes: docker ps --filter label=gvirtus.io/cluster=$name"
echo "Stop everything with: make demo-down"
[ "$check" = 1 ] || exit 0

say "Check: the suggested commands, as shown"
declare -A printed
for step in "${next_steps[@]}"; do
  read -ra words <<<"$step"
  out=$("${words[@]}" 2>&1) || { echo "$out" >&2; die "\"$step\" failed"; }
  [ -n "$out" ] || die "\"$step\" printed nothing"
  printed[$step]=$out
  echo "\$ $step: $(wc -l <<<"$out") lines"
done
for node in gpu-a gpu-b; do
  grep -q "$node" <<<"${printed[${next_steps[0]}]}" || die "\"${next_steps[0]}\" does not list $node"
done
grep -q "connected to the backend" <<<"${printed[${next_steps[1]}]}" || die "train-1's log shows no backend connection"
say "Check passed: the demo's story on Kubernetes $(kubectl version -o json | jq -r .serverVersion.gitVersion); stopping the cluster"
