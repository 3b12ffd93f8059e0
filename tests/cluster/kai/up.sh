#!/usr/bin/env bash
# Runs NVIDIA KAI-Scheduler (scheduler, binder, podgrouper; tests/cluster/kai/build.sh)
# against a running local cluster, as host processes, the way its chart deploys them:
# its CRDs from the module, namespace kai-scheduler, and a queue hierarchy:
#   gvirtus (department)  ->  team-a (gpu limit 8), team-b (gpu limit 1)
# Logs and pids in build/cluster/NAME/kai/; stopped by kai/down.sh NAME (and by
# tests/cluster/down.sh).
#   kai/up.sh NAME       (KUBECONFIG: the cluster's)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
source "$here/../versions.sh"
name=${1:?usage: kai/up.sh NAME}
: "${KUBECONFIG:?KUBECONFIG must name the cluster}"
export PATH=$CLUSTER_BIN:$PATH
say() { printf '[kai %s %s] %s\n' "$name" "$(date +%H:%M:%S)" "$*" >&2; }
kai=$(bash "$here/build.sh")
state=$repo/build/cluster/$name/kai
mkdir -p "$state"
bash "$here/down.sh" "$name" 2>/dev/null || true

kubectl apply --server-side -f "$kai/crds" >/dev/null
# A CRD read before the API server wrote its first status has no conditions, and kubectl
# wait then fails at once ("accessor error: <nil>") instead of waiting: try again.
for attempt in $(seq 1 60); do
  kubectl wait --for condition=established --timeout=60s -f "$kai/crds" >/dev/null 2>&1 && break
  [ "$attempt" = 60 ] && { say "KAI CRDs not established after 60 tries"; exit 1; }
  sleep 1
done
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Namespace
metadata: {name: kai-scheduler}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: gvirtus}
spec:
  resources:
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    gpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: team-a}
spec:
  parentQueue: gvirtus
  resources:
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    gpu: {quota: 8, limit: 8, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: team-b}
spec:
  parentQueue: gvirtus
  resources:
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    gpu: {quota: 1, limit: 1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
YAML

# start COMPONENT ARGS...: detached, its own session, output to its log.
start() {
  local component=$1
  shift
  KUBECONFIG=$KUBECONFIG setsid "$kai/bin/$component" "$@" >"$state/$component.log" 2>&1 </dev/null &
  echo $! >"$state/$component.pid"
}
# Ports of their own: several clusters (and their webhooks' metrics) share this host.
start scheduler --scheduler-name kai-scheduler --listen-address 127.0.0.1:18680 \
  --plugin-server-port 18681 --schedule-period 1s
start binder --scheduler-name kai-scheduler --cdi-enabled \
  --metrics-bind-address 127.0.0.1:18682 --health-probe-bind-address 127.0.0.1:18683
start podgrouper --scheduler-name kai-scheduler \
  --metrics-bind-address 127.0.0.1:18684 --health-probe-bind-address 127.0.0.1:18685
sleep 2
for component in scheduler binder podgrouper; do
  kill -0 "$(cat "$state/$component.pid")" 2>/dev/null ||
    { say "FAILED: $component exited; its log:"; tail -n 20 "$state/$component.log" >&2; exit 1; }
done
say "KAI-Scheduler $KAI_VERSION running (scheduler, binder, podgrouper); queues gvirtus/team-a (8 GPUs), gvirtus/team-b (1 GPU)"
