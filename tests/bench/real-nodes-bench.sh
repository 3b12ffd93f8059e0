#!/usr/bin/env bash
# Benchmark on real nodes (not a test): how long a pod takes from create to Running on
# the local cluster's real kubelet + containerd nodes, 20 GVirtuS pods (admitted by our
# webhook through its Service, given a backend, a projected properties.json and a
# virtual GPU from our device plugin) against 20 plain pods of the same image on the
# same nodes, 20 pods that ask with a DRA claim instead (docs/dra.md), 20 that ask for the
# extended resource gvirtus.io/gpu, and 20 claims again with binding conditions on (what the
# claim binder's answer costs); the memory of an idle node container; and, with every backend pod lost at
# once, how long until a Deployment's frontends run again on new backend pods (issue 39).
# Prints figures and ratios.
#   tests/bench/real-nodes-bench.sh   (on a fresh cluster of tests/e2e/real/up.sh plus a
#                                      third frontend node; removed after)
# Environment: BENCH_PODS (default 20), BENCH_LOST_FRONTENDS (default 10).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
pods=${BENCH_PODS:-20}
log_tag="bench-real"
# shellcheck source=../lib/log.sh
source "$repo/tests/lib/log.sh"
name="gvirtus-bench-real"
trap 'bash "$repo/tests/e2e/real/down.sh" "$name"' EXIT
eval "$(bash "$repo/tests/e2e/real/up.sh" "$name")"
# Each GVirtuS pod takes one of a frontend's 8 virtual GPUs: a third frontend makes 24.
bash "$repo/tests/cluster/node/add.sh" "$name" fe-c --label topology.kubernetes.io/zone=zone-a \
  --registry "${E2E_TEST_IMAGE%%/*}"
fe_c_gpus() { [ "$(kubectl get node fe-c -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 8 ]; }
wait_until 60 "nvidia.com/gpu 8 on fe-c" fe_c_gpus || true
ns=bench-real
kubectl delete namespace $ns --ignore-not-found --wait=true >/dev/null
kubectl create namespace $ns >/dev/null
wait_until 30 "the default ServiceAccount in $ns" kubectl -n $ns get serviceaccount default || true

now_ms() { date +%s%3N; }
# run_batch KIND LABELS [SPEC] [CONTAINER]: creates $pods pods at once, polls until all
# Running; prints one create->Running latency (ms) per pod. SPEC and CONTAINER: more fields
# of the pod's spec and of its container, in flow style, each with a leading ", ".
run_batch() {
  local kind=$1 labels=$2 spec=${3:-} container=${4:-} i manifest="" created
  for i in $(seq 1 "$pods"); do
    manifest+="---
apiVersion: v1
kind: Pod
metadata: {name: $kind-$i, namespace: $ns, labels: {bench: $kind$labels}}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: app, image: $E2E_TEST_IMAGE, command: [sleep, '3600']$container}]
  ${spec#, }
"
  done
  declare -A seen=()
  created=$(now_ms)
  kubectl apply -f - <<<"$manifest" >/dev/null
  local deadline=$((SECONDS + 180))
  while [ ${#seen[@]} -lt "$pods" ] && [ $SECONDS -lt $deadline ]; do
    local t line
    t=$(now_ms)
    while read -r line; do
      [ -n "$line" ] && [ -z "${seen[$line]:-}" ] && seen[$line]=$((t - created))
    done < <(kubectl -n $ns get pods -l "bench=$kind" --field-selector status.phase=Running \
      -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
    sleep 0.1
  done
  [ ${#seen[@]} = "$pods" ] || { say "only ${#seen[@]} of $pods $kind pods ran"; exit 1; }
  printf '%s\n' "${seen[@]}"
}
percentile() { sort -n | awk -v p="$1" '{v[NR]=$1} END {i=int((NR*p+99)/100); if (i<1) i=1; print v[i]}'; }

# Before any workload: kubelet, containerd, kube-proxy and GVirtuS's own pods.
mapfile -t node_containers < <(docker ps -q --filter "label=gvirtus.io/cluster=$name")
idle=$(docker stats --no-stream --format '  {{.Name}}\t{{.MemUsage}}' "${node_containers[@]}")
say "warming the nodes (image present, first sandbox)"
run_batch warm "" >/dev/null
kubectl -n $ns delete pods -l bench=warm --wait=true >/dev/null
say "$pods plain pods"
plain=$(run_batch plain "")
kubectl -n $ns delete pods -l bench=plain --wait=true >/dev/null
say "$pods GVirtuS pods"
gvirtus=$(run_batch gvirtus ', gvirtus.io/enabled: "true"')
kubectl -n $ns delete pods -l bench=gvirtus --wait=true >/dev/null
# The DRA path (docs/dra.md) on the same nodes: each pod's claim allocated by kube-scheduler
# from the published backend GPUs and prepared by the device plugin (--dra).
say "$pods GVirtuS pods with a DRA claim each"
bash "$repo/tests/e2e/real/dra.sh" on || { say "DRA could not be turned on"; exit 1; }
two_slices() {
  [ "$(kubectl get resourceslices -o json | jq '[.items[] | select(.spec.driver == "gpu.gvirtus.io")] | length')" = 2 ]
}
wait_until 120 "both backends' GPUs published" two_slices || exit 1
kubectl apply -f - >/dev/null <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu, namespace: $ns}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.gvirtus.io}}]}}}
YAML
# devices_conditioned: how many published devices name binding conditions (1.36 and later,
# with --dra-binding-timeout).
devices_conditioned() {
  kubectl get resourceslices -o json |
    jq '[.items[] | select(.spec.driver == "gpu.gvirtus.io") | .spec.devices[] | select(.bindingConditions)] | length'
}
dra=$(run_batch dra ', gvirtus.io/dra: "true"' \
  ', resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]' ', resources: {claims: [{name: gpu}]}')
kubectl -n $ns delete pods -l bench=dra --wait=true >/dev/null
# The extended-resource path: an unchanged manifest asking for gvirtus.io/gpu, its claim made
# by kube-scheduler (docs/dra.md, "Asking for an extended resource").
say "$pods pods asking for the extended resource gvirtus.io/gpu"
extended=$(run_batch extended '' '' ', resources: {limits: {gvirtus.io/gpu: 1}}')
kubectl -n $ns delete pods -l bench=extended --wait=true >/dev/null
# The claim path again with binding conditions on (--dra-binding-timeout, off by default):
# what the claim binder's answer costs (kube-scheduler looks for it every 5 s).
bound=""
say "$pods GVirtuS pods with a DRA claim each, binding conditions on (--dra-binding-timeout=60s)"
kubectl -n gvirtus-system patch deployment gvirtus-webhook --type=json -p \
  '[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--dra-binding-timeout=60s"}]' >/dev/null
kubectl -n gvirtus-system rollout status deployment/gvirtus-webhook --timeout=180s >/dev/null
conditioned() { [ "$(devices_conditioned)" != 0 ]; }
if wait_until 120 "the devices published with binding conditions" conditioned; then
  bound=$(run_batch bound ', gvirtus.io/dra: "true"' \
    ', resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]' ', resources: {claims: [{name: gpu}]}')
  kubectl -n $ns delete pods -l bench=bound --wait=true >/dev/null
fi
bash "$repo/tests/e2e/real/dra.sh" off || say "DRA could not be turned off"

p50p=$(percentile 50 <<<"$plain") p95p=$(percentile 95 <<<"$plain")
p50g=$(percentile 50 <<<"$gvirtus") p95g=$(percentile 95 <<<"$gvirtus")
p50d=$(percentile 50 <<<"$dra") p95d=$(percentile 95 <<<"$dra")
p50e=$(percentile 50 <<<"$extended") p95e=$(percentile 95 <<<"$extended")
printf '\nreal nodes: %d pods each, create -> Running (client-side, polled every ~0.1 s)\n' "$pods"
printf '  %-26s p50 %6s ms   p95 %6s ms\n' plain "$p50p" "$p95p" GVirtuS "$p50g" "$p95g" \
  "GVirtuS (DRA claim)" "$p50d" "$p95d" "extended resource" "$p50e" "$p95e"
if [ -n "$bound" ]; then
  p50b=$(percentile 50 <<<"$bound") p95b=$(percentile 95 <<<"$bound")
  printf '  %-26s p50 %6s ms   p95 %6s ms\n' "DRA claim, binding cond." "$p50b" "$p95b"
fi
awk -v a="$p50g" -v b="$p50p" -v c="$p95g" -v d="$p95p" \
  'BEGIN {printf "  ratio GVirtuS/plain: p50 %.2fx, p95 %.2fx\n", a / b, c / d}'
awk -v a="$p50d" -v b="$p50g" -v c="$p95d" -v d="$p95g" \
  'BEGIN {printf "  ratio DRA path/webhook path: p50 %.2fx, p95 %.2fx\n", a / b, c / d}'
awk -v a="$p50e" -v b="$p50d" -v c="$p95e" -v d="$p95d" \
  'BEGIN {printf "  ratio extended resource/DRA claim: p50 %.2fx, p95 %.2fx\n", a / b, c / d}'
if [ -n "$bound" ]; then
  awk -v a="$p50b" -v b="$p50d" -v c="$p95b" -v d="$p95d" \
    'BEGIN {printf "  ratio DRA claim with/without binding conditions: p50 %.2fx, p95 %.2fx\n", a / b, c / d}'
else
  printf '  (binding conditions not served: no batch with them)\n'
fi
printf '\nnode container memory before any workload (docker stats):\n%s\n' "$idle"

# Backend lost (issue 39): a Deployment's GVirtuS pods hold sessions on the backends; every
# backend pod is deleted at once with a grace period of 1 s (as a lost node or a crashed
# pod leaves them). Per frontend: from the deletion to its replacement pod Running with a
# session its backend answered. The floor beside it: the new backend pods Ready.
lost=${BENCH_LOST_FRONTENDS:-10}
say "backend lost: $lost frontends, every backend pod deleted"
kubectl apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: lost, namespace: $ns}
spec:
  replicas: $lost
  selector: {matchLabels: {bench: lost}}
  template:
    metadata: {labels: {bench: lost, gvirtus.io/enabled: "true"}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: app
          image: $E2E_TEST_IMAGE
          command: [gvirtus-frontend-standin]
          env: [{name: GVIRTUS_STANDIN_PING, value: "2"}]
YAML
# answered_pods: "uid name" of the Running pods whose session the backend answered.
answered_pods() {
  local pod uid deleting
  kubectl -n $ns get pods -l bench=lost --field-selector status.phase=Running \
    -o jsonpath='{range .items[*]}{.metadata.uid} {.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}' |
    while read -r uid pod deleting; do
      [ -z "$deleting" ] || continue
      if kubectl -n $ns logs "$pod" 2>/dev/null | grep -q "backend answered"; then
        echo "$uid $pod"
      fi
    done
  return 0
}
all_answered() { [ "$(answered_pods | grep -c .)" = "$lost" ]; }
wait_until 180 "the $lost frontends to connect" all_answered ||
  { say "the $lost frontends did not all connect"; exit 1; }
old=$(answered_pods | cut -d' ' -f1)
backend_count=$(kubectl -n gvirtus-system get pods -l app.kubernetes.io/component=backend -o name | grep -c .)
declare -A back=()
backends_ready=""
started=$(now_ms)
kubectl -n gvirtus-system delete pods -l app.kubernetes.io/component=backend --grace-period=1 \
  --wait=false >/dev/null
deadline=$((SECONDS + 300))
while [ ${#back[@]} -lt "$lost" ] && [ $SECONDS -lt $deadline ]; do
  t=$(now_ms)
  if [ -z "$backends_ready" ] && [ "$(kubectl -n gvirtus-system get pods -l app.kubernetes.io/component=backend \
    -o jsonpath='{range .items[*]}{.metadata.deletionTimestamp}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -cx True)" -ge "$backend_count" ]; then
    backends_ready=$((t - started))
  fi
  while read -r uid _; do
    [ -n "$uid" ] && ! grep -qx "$uid" <<<"$old" && [ -z "${back[$uid]:-}" ] && back[$uid]=$((t - started))
  done < <(answered_pods)
  sleep 0.2
done
[ ${#back[@]} = "$lost" ] || { say "only ${#back[@]} of $lost frontends ran again"; exit 1; }
kubectl -n $ns delete deployment lost --wait=false >/dev/null
p50l=$(printf '%s\n' "${back[@]}" | percentile 50) p95l=$(printf '%s\n' "${back[@]}" | percentile 95)
printf '\nbackend lost: %d frontends, every backend pod deleted (grace 1 s) -> replacement Running and answered\n' "$lost"
printf '  frontends      p50 %6s ms   p95 %6s ms\n' "$p50l" "$p95l"
printf '  backends Ready again after %s ms (the floor)\n' "${backends_ready:-?}"

# Why the backend follower never rewrites a running pod's address (issue 39): how the
# kubelet's refresh of a projected downward-API file races a container restart. Each of
# $races pods projects its annotation bench/value and prints the file when its container
# starts. The annotation is changed and, at the same moment, the container exits (its
# first restart has no back-off). Counted: restarts that read the old value; and, without
# a restart, the time until a running container sees the new value.
races=${BENCH_RACES:-10}
say "downward-API refresh against a container restart: $races pods"
manifest=""
for i in $(seq 1 "$races"); do
  manifest+="---
apiVersion: v1
kind: Pod
metadata: {name: race-$i, namespace: $ns, labels: {bench: race}, annotations: {bench/value: old}}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: v, downwardAPI: {items: [{path: value, fieldRef: {fieldPath: \"metadata.annotations['bench/value']\"}}]}}]
  containers:
    - name: app
      image: $E2E_TEST_IMAGE
      command: [sh, -c, 'echo start \$(cat /v/value); while [ ! -e /tmp/exit ]; do sleep 0.05; done; exit 1']
      volumeMounts: [{name: v, mountPath: /v}]
"
done
kubectl apply -f - <<<"$manifest" >/dev/null
kubectl -n $ns wait pods -l bench=race --for=condition=Ready --timeout=180s >/dev/null
stale=0
refresh=()
# The write and the crash at the same moment, as when a pod is re-pointed around the time
# its container fails on the lost backend.
for i in $(seq 1 "$races"); do
  kubectl -n $ns annotate pod "race-$i" bench/value=new --overwrite >/dev/null &
  kubectl -n $ns exec "race-$i" -- touch /tmp/exit &
  wait
done
for i in $(seq 1 "$races"); do
  for _ in $(seq 1 300); do
    [ "$(kubectl -n $ns get pod "race-$i" -o jsonpath='{.status.containerStatuses[0].restartCount}')" -ge 1 ] &&
      [ -n "$(kubectl -n $ns logs "race-$i" 2>/dev/null)" ] && break
    sleep 0.1
  done
  first=$(kubectl -n $ns logs "race-$i" 2>/dev/null || true)
  [ "$(kubectl -n $ns get pod "race-$i" -o jsonpath='{.status.containerStatuses[0].restartCount}')" -ge 1 ] ||
    { say "race-$i did not restart within 30 s"; exit 1; }
  [ "$first" = "start old" ] && stale=$((stale + 1))
done
# Without a restart: annotation written -> the running container reads it.
for i in $(seq 1 "$races"); do
  started=$(now_ms)
  kubectl -n $ns annotate pod "race-$i" bench/value="v$i" --overwrite >/dev/null
  deadline=$((SECONDS + 180))
  until [ "$(kubectl -n $ns exec "race-$i" -- cat /v/value 2>/dev/null)" = "v$i" ]; do
    [ $SECONDS -lt $deadline ] || { say "race-$i never saw v$i"; exit 1; }
    sleep 0.05
  done
  refresh+=($(($(now_ms) - started)))
done
kubectl -n $ns delete pods -l bench=race --wait=false >/dev/null
printf '\ndownward-API file against a container restart: %d pods, annotation changed as the container exits\n' "$races"
printf '  restarted containers that read the old value: %d of %d\n' "$stale" "$races"
printf '  running container sees a new value after: p50 %s ms, p95 %s ms\n' \
  "$(printf '%s\n' "${refresh[@]}" | percentile 50)" "$(printf '%s\n' "${refresh[@]}" | percentile 95)"
kubectl delete namespace $ns --wait=false >/dev/null
