#!/usr/bin/env bash
# Runs, as host processes, what each GVirtuS pod of the local cluster would run: kwok
# fakes the pods of the manifests' DaemonSets and Deployment (no kubelet, no images), and
# this loop gives each of them its process, started when the pod appears and stopped when
# it goes:
#   gvirtus-labeler pod on node N   -> gvirtus-labeler --node-name N
#   gvirtus-webhook pod #i          -> gvirtus-webhook on 127.0.0.1:(18443+i), own CA
#   gvirtus-backend pod P           -> gvirtus-backend-shim for P, with a stand-in backend
# The device plugin needs a kubelet, which kwok has not: nodes get the nvidia.com/gpu
# capacity it would advertise instead (local-up.sh).
#   pod-runner.sh STATE_DIR     (KUBECONFIG and PATH from tests/cluster/up.sh)
set -uo pipefail
state=${1:?usage: pod-runner.sh STATE_DIR}
repo=$(cd "$(dirname "$0")/../../.." && pwd)
bin=${GVIRTUS_BIN_DIR:-$repo/build/bin}
fake_backend=${GVIRTUS_FAKE_BACKEND:-$repo/build/tests/fake_gvirtus_backend}
mkdir -p "$state/procs" "$state/logs"
ns=gvirtus-system

# start KEY COMMAND...: starts COMMAND for KEY unless it already runs.
start() {
  local key=$1 pidfile="$state/procs/$1.pid"
  shift
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then return; fi
  setsid "$@" >>"$state/logs/$key.log" 2>&1 </dev/null &
  echo $! >"$pidfile"
  echo "[pod-runner] started $key" >&2
}
stop() {
  local pidfile="$state/procs/$1.pid"
  [ -f "$pidfile" ] || return 0
  kill -TERM -- "-$(cat "$pidfile")" 2>/dev/null
  rm -f "$pidfile"
  echo "[pod-runner] stopped $1" >&2
}
pods() { # pods SELECTOR -> "name node" lines of pods bound to a node
  kubectl get pods -n "$ns" -l "$1" --request-timeout=10s \
    -o jsonpath='{range .items[?(@.spec.nodeName)]}{.metadata.name} {.spec.nodeName}{"\n"}{end}' 2>/dev/null
}

trap 'for f in "$state"/procs/*.pid; do [ -e "$f" ] && stop "$(basename "$f" .pid)"; done; exit 0' TERM INT
while true; do
  wanted=()
  while read -r pod node; do
    [ -n "$pod" ] || continue
    # A GPU node's labeler finds the GPU probe file local-up.sh made for it.
    wanted+=("labeler-$node")
    start "labeler-$node" "$bin/gvirtus-labeler" --kubeconfig "$KUBECONFIG" --node-name "$node" \
      --gpu-probe-paths "$state/gpus/$node" --gpu-probe-interval 1s --health-addr ""
  done < <(pods app.kubernetes.io/name=gvirtus-labeler)
  i=0
  while read -r pod node; do
    [ -n "$pod" ] || continue
    wanted+=("webhook-$i")
    start "webhook-$i" env POD_NAME="$pod" POD_NAMESPACE=$ns "$bin/gvirtus-webhook" \
      --kubeconfig "$KUBECONFIG" --listen "127.0.0.1:$((18443 + i))" --namespace $ns \
      --tls-extra-sans 127.0.0.1 --leader-elect --health-addr "127.0.0.1:$((18543 + i))"
    i=$((i + 1))
  done < <(pods app.kubernetes.io/name=gvirtus-webhook | sort)
  while read -r pod node; do
    [ -n "$pod" ] || continue
    wanted+=("backend-$pod")
    port_file="$state/procs/backend-$pod.port"
    [ -f "$port_file" ] || echo $((19000 + $(ls "$state"/procs/*.port 2>/dev/null | wc -l))) >"$port_file"
    start "backend-$pod" "$bin/gvirtus-backend-shim" --kubeconfig "$KUBECONFIG" --pod-name "$pod" \
      --pod-namespace $ns --port "$(cat "$port_file")" --max-sessions "${E2E_MAX_SESSIONS:-3}" \
      --publish-interval 1s --config-out "$state/procs/backend-$pod.json" --health-addr "" \
      --drain-timeout 1s -- "$fake_backend"
  done < <(pods app.kubernetes.io/component=backend)
  for f in "$state"/procs/*.pid; do
    [ -e "$f" ] || continue
    key=$(basename "$f" .pid)
    [[ " ${wanted[*]} " == *" $key "* ]] || stop "$key"
  done
  sleep 1
done
