#!/usr/bin/env bash
# Benchmark on real nodes (not a test): how long a pod takes from create to Running on
# the local cluster's real kubelet + containerd nodes, 20 GVirtuS pods (admitted by our
# webhook through its Service, given a backend, a projected properties.json and a
# virtual GPU from our device plugin) against 20 plain pods of the same image on the
# same nodes, 20 pods that ask with a DRA claim instead (docs/dra.md), 20 that ask for the
# extended resource gvirtus.io/gpu, and 20 claims again with binding conditions on (what the
# claim binder's answer costs); the memory of an idle node container; GVirtuS-shaped calls
# from a pod to its backend against the same calls between the nodes' host networks
# (real-nodes/cuda-path.sh); with every backend pod lost at once, how long until a
# Deployment's frontends run again on new backend pods (issue 39); and with a backend's
# node killed, the same (real-nodes/lost-node.sh). Each section prints the machine's load
# while it ran. The NetworkPolicy agent runs on every node, as in the end-to-end tests.
# Prints figures and ratios.
#   tests/bench/real-nodes-bench.sh   (on a fresh cluster of tests/e2e/real/up.sh plus a
#                                      third frontend node; removed after)
# Environment:
#   BENCH_PODS (default 20)              pods per create batch
#   BENCH_LOST_FRONTENDS (default 10)    frontends when every backend pod is deleted
#   BENCH_LOST_NODE_FRONTENDS (default 12)  frontends when a backend's node is killed (the
#                                        other backend must have room for all: 16 sessions)
#   BENCH_ROUNDS, BENCH_SESSIONS (2000, 20)  CUDA-path calls and sessions
#   BENCH_HEARTBEAT_FACTOR (default 1)   kwokctl's heartbeat factor: 1 gives upstream's
#                                        --node-monitor-grace-period (40 s); the end-to-end
#                                        test bed keeps kwokctl's 5 (3m20s)
#   BENCH_SECTIONS (default: create cuda-path lost-pods race lost-node)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
pods=${BENCH_PODS:-20}
log_tag="bench-real"
# shellcheck source=../lib/log.sh
source "$repo/tests/lib/log.sh"
# shellcheck source=real-nodes/machine-load.sh
source "$here/real-nodes/machine-load.sh"
# shellcheck source=real-nodes/create.sh
source "$here/real-nodes/create.sh"
# shellcheck source=real-nodes/cuda-path.sh
source "$here/real-nodes/cuda-path.sh"
# shellcheck source=real-nodes/lost-pods.sh
source "$here/real-nodes/lost-pods.sh"
# shellcheck source=real-nodes/downward-race.sh
source "$here/real-nodes/downward-race.sh"
# shellcheck source=real-nodes/lost-node.sh
source "$here/real-nodes/lost-node.sh"
sections=" ${BENCH_SECTIONS:-create cuda-path lost-pods race lost-node} "
wanted() { [[ $sections == *" $1 "* ]]; }
name="gvirtus-bench-real"
trap 'bash "$repo/tests/e2e/real/down.sh" "$name"' EXIT
export NODE_HEARTBEAT_FACTOR=${BENCH_HEARTBEAT_FACTOR:-1}
eval "$(bash "$repo/tests/e2e/real/up.sh" "$name")"
# Each GVirtuS pod takes one of a frontend's 8 virtual GPUs: a third frontend makes 24.
bash "$repo/tests/cluster/node/add.sh" "$name" fe-c --label topology.kubernetes.io/zone=zone-a \
  --registry "${E2E_TEST_IMAGE%%/*}"
fe_c_gpus() { [ "$(kubectl get node fe-c -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 8 ]; }
wait_until 60 "nvidia.com/gpu 8 on fe-c" fe_c_gpus || true
bash "$repo/tests/cluster/netpol/up.sh" || { say "the NetworkPolicy agent did not start"; exit 1; }
ns=bench-real
kubectl delete namespace $ns --ignore-not-found --wait=true >/dev/null
kubectl create namespace $ns >/dev/null
wait_until 30 "the default ServiceAccount in $ns" kubectl -n $ns get serviceaccount default || true

now_ms() { date +%s%3N; }
percentile() { sort -n | awk -v p="$1" '{v[NR]=$1} END {i=int((NR*p+99)/100); if (i<1) i=1; print v[i]}'; }

# section NAME FUNCTION ARGS...: runs one section when BENCH_SECTIONS names it, then the
# machine's load while it ran.
section() {
  local section_name=$1
  shift
  wanted "$section_name" || return 0
  load_start
  "$@"
  load_line
}
section create create_batches
section cuda-path cuda_path "${BENCH_ROUNDS:-2000}" "${BENCH_SESSIONS:-20}"
section lost-pods lost_pods "${BENCH_LOST_FRONTENDS:-10}"
section race downward_race "${BENCH_RACES:-10}"
# Last: the killed node stays down until the cluster is removed.
section lost-node lost_node "${BENCH_LOST_NODE_FRONTENDS:-12}"
kubectl delete namespace $ns --wait=false >/dev/null
