#!/usr/bin/env bash
# Benchmark on real nodes (not a test): how long a pod takes from create to Running on
# the local cluster's real kubelet + containerd nodes, 20 GVirtuS pods (admitted by our
# webhook through its Service, given a backend, a projected properties.json and a
# virtual GPU from our device plugin) against 20 plain pods of the same image on the
# same nodes; and the memory of an idle node container. Prints figures and ratios.
#   tests/bench/real-nodes-bench.sh   (on a fresh cluster of tests/e2e/real/up.sh plus a
#                                      third frontend node; removed after)
# Environment: BENCH_PODS (default 20).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
pods=${BENCH_PODS:-20}
say() { printf '[bench-real %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
name=gvirtus-bench-real
trap 'bash "$repo/tests/e2e/real/down.sh" "$name"' EXIT
eval "$(bash "$repo/tests/e2e/real/up.sh" "$name")"
# Each GVirtuS pod takes one of a frontend's 8 virtual GPUs: a third frontend makes 24.
bash "$repo/tests/cluster/node/add.sh" "$name" fe-c --label topology.kubernetes.io/zone=zone-a \
  --registry "${E2E_TEST_IMAGE%%/*}"
for _ in $(seq 1 60); do
  [ "$(kubectl get node fe-c -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 8 ] && break
  sleep 1
done
ns=bench-real
kubectl delete namespace $ns --ignore-not-found --wait=true >/dev/null
kubectl create namespace $ns >/dev/null
for _ in $(seq 1 60); do kubectl -n $ns get serviceaccount default >/dev/null 2>&1 && break; sleep 0.5; done

now_ms() { date +%s%3N; }
# run_batch KIND LABELS: creates $pods pods at once, polls until all Running; prints
# one create->Running latency (ms) per pod.
run_batch() {
  local kind=$1 labels=$2 i manifest="" created
  for i in $(seq 1 "$pods"); do
    manifest+="---
apiVersion: v1
kind: Pod
metadata: {name: $kind-$i, namespace: $ns, labels: {bench: $kind$labels}}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: app, image: $E2E_TEST_IMAGE, command: [sleep, '3600']}]
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
idle=$(docker stats --no-stream --format '  {{.Name}}\t{{.MemUsage}}' $(docker ps -q --filter "label=gvirtus.io/cluster=$name"))
say "warming the nodes (image present, first sandbox)"
run_batch warm "" >/dev/null
kubectl -n $ns delete pods -l bench=warm --wait=true >/dev/null
say "$pods plain pods"
plain=$(run_batch plain "")
kubectl -n $ns delete pods -l bench=plain --wait=true >/dev/null
say "$pods GVirtuS pods"
gvirtus=$(run_batch gvirtus ', gvirtus.io/enabled: "true"')
kubectl -n $ns delete pods -l bench=gvirtus --wait=false >/dev/null

p50p=$(percentile 50 <<<"$plain") p95p=$(percentile 95 <<<"$plain")
p50g=$(percentile 50 <<<"$gvirtus") p95g=$(percentile 95 <<<"$gvirtus")
printf '\nreal nodes: %d pods each, create -> Running (client-side, polled every ~0.1 s)\n' "$pods"
printf '  %-14s p50 %6s ms   p95 %6s ms\n' plain "$p50p" "$p95p" GVirtuS "$p50g" "$p95g"
awk -v a="$p50g" -v b="$p50p" -v c="$p95g" -v d="$p95p" \
  'BEGIN {printf "  ratio GVirtuS/plain: p50 %.2fx, p95 %.2fx\n", a / b, c / d}'
printf '\nnode container memory before any workload (docker stats):\n%s\n' "$idle"
kubectl delete namespace $ns --wait=false >/dev/null
