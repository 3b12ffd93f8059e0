#!/usr/bin/env bash
# Brings up a GVirtuS-aware local cluster: the real control plane with kwok nodes (two
# frontends, two GPU nodes in two zones), the manifests applied as an operator would,
# and every component pod's work done by a host process (pod-runner.sh). The webhook is
# registered by URL (127.0.0.1) and runs its own CA. Prints `export` lines.
#   local-up.sh NAME
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
name=${1:?usage: local-up.sh NAME}
state=$repo/build/e2e/$name
say() { printf '[local %s %s] %s\n' "$name" "$(date +%H:%M:%S)" "$*" >&2; }
step_start=$SECONDS
step() { say "$* (+$((SECONDS - step_start))s)"; }

bin=${GVIRTUS_BIN_DIR:-$repo/build/bin}
for b in "$bin/gvirtus-labeler" "$bin/gvirtus-webhook" "$bin/gvirtus-backend-shim" \
  "${GVIRTUS_FAKE_BACKEND:-$repo/build/tests/fake_gvirtus_backend}"; do
  [ -x "$b" ] || { say "missing $b: run make build first"; exit 1; }
done
bash "$here/local-down.sh" "$name" --keep-cluster 2>/dev/null || true
rm -rf "$state/logs" "$state/procs"
env_lines=$(bash "$repo/tests/cluster/up.sh" "$name")
eval "$env_lines"
mkdir -p "$state/gpus" "$state/logs"

step "nodes: fe-a, fe-b (frontends), gpu-a, gpu-b (GPU nodes, opted in as backends)"
# Frontends carry the nvidia.com/gpu capacity the device plugin makes kubelet advertise.
bash "$repo/tests/cluster/add-node.sh" fe-a topology.kubernetes.io/zone=zone-a --capacity nvidia.com/gpu=8
bash "$repo/tests/cluster/add-node.sh" fe-b topology.kubernetes.io/zone=zone-b --capacity nvidia.com/gpu=8
for gpu in gpu-a:zone-a gpu-b:zone-b; do
  bash "$repo/tests/cluster/add-node.sh" "${gpu%%:*}" "topology.kubernetes.io/zone=${gpu#*:}" \
    gvirtus.io/backend.allowed="${E2E_OPT_IN_BACKENDS:-true}" --capacity nvidia.com/gpu=4
  touch "$state/gpus/${gpu%%:*}"  # what the labeler's GPU probe finds there
done

step "applying the manifests (kubectl apply -k manifests/)"
kubectl apply -k "$repo/manifests" >"$state/logs/apply.log"
# Registered by URL: the webhook runs on this host, not behind the Service.
kubectl patch mutatingwebhookconfiguration gvirtus-webhook --type json -p "$(cat <<JSON
[{"op": "replace", "path": "/webhooks/0/clientConfig", "value": {"url": "https://127.0.0.1:18443/mutate"}},
 {"op": "replace", "path": "/webhooks/1/clientConfig", "value": {"url": "https://127.0.0.1:18443/mutate"}}]
JSON
)" >/dev/null

step "starting the component processes (pod-runner.sh)"
setsid bash "$here/pod-runner.sh" "$state" >>"$state/logs/pod-runner.log" 2>&1 </dev/null &
echo $! >"$state/pod-runner.pid"

wait_for() { # wait_for DESCRIPTION SECONDS COMMAND...
  local what=$1 deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      say "FAILED: $what; component logs in $state/logs:"
      tail -n 5 "$state"/logs/*.log >&2
      exit 1
    fi
    sleep 1
  done
  step "$what"
}
labelled() { [ "$(kubectl get nodes -l gvirtus.io/frontend.allowed -o name | wc -l)" -ge 4 ]; }
wait_for "every node labelled by its labeler" 90 labelled
webhook_ready() { curl -sf http://127.0.0.1:18543/readyz; }
wait_for "webhook ready (own CA in Secret gvirtus-webhook-tls, caBundle written)" 90 webhook_ready
if [ "${E2E_OPT_IN_BACKENDS:-true}" = true ]; then
  loads() {
    [ "$(kubectl get pods -n gvirtus-system -l app.kubernetes.io/component=backend \
      -o jsonpath='{range .items[*]}{.metadata.annotations.gvirtus\.io/load}{"\n"}{end}' |
      grep -c connections)" -ge 2 ]
  }
  wait_for "both backend shims publishing gvirtus.io/load" 90 loads
fi
step "ready"
echo "$env_lines"
echo "export GVIRTUS_E2E_STATE=$state"
