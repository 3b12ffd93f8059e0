#!/usr/bin/env bash
# Every metric the alert rules (monitoring/prometheus/*.yaml) and the Grafana dashboard
# (monitoring/grafana/*.json) use is exported by a real binary: the four binaries are
# started as the manifests run them, as far as a machine without a cluster allows (the
# webhook with static backends and TLS files; the shim over the test stand-in for
# gvirtus-backend and a stand-in NVML; the labeler and the device plugin with nothing to
# talk to, which they survive), and their /metrics are scraped. The metric names are read
# from the rules and the dashboard, so that a rule added later is checked too.
#   metrics_exist_test.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${1:-${GVIRTUS_BUILD_DIR:-$repo/build}}
bin=$build/bin
work=$(mktemp -d)
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck disable=SC2034  # read by say (tests/lib/log.sh)
log_tag=metrics-exist
# shellcheck source=../lib/checks.sh
source "$repo/tests/lib/checks.sh"

for b in gvirtus-labeler gvirtus-device-plugin gvirtus-webhook gvirtus-backend-shim; do
  [ -x "$bin/$b" ] || { say "FAIL: $bin/$b is not built (make build)"; exit 1; }
done
for f in "$build/tests/fake_gvirtus_backend" "$build/tests/libfake_nvml.so"; do
  [ -e "$f" ] || { say "FAIL: $f is not built (make build)"; exit 1; }
done

# The names used: every gvirtus_* and process_* identifier in the expressions.
mapfile -t used < <(cat "$repo"/monitoring/prometheus/*.yaml "$repo"/monitoring/grafana/*.json |
  grep -oE '\b(gvirtus|process)_[a-z0-9_]+' | sort -u)
[ ${#used[@]} -gt 10 ] || { say "FAIL: read only ${#used[@]} metric names from monitoring/"; exit 1; }

# Free ports on 127.0.0.1 (bound then released; a clash with another test is retried).
free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 30000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
  done
}

# A kubeconfig whose server refuses connections: the components start, retry and export.
cat >"$work/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
KUBECONFIG
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj /CN=gvirtus-webhook -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null

declare -A ports
start() {
  local name=$1; shift
  local port
  port=$(free_port)
  ports[$name]=$port
  "$@" --health-addr="127.0.0.1:$port" --log-level=warn >"$work/$name.log" 2>&1 &
  pids+=($!)
}
start labeler "$bin/gvirtus-labeler" --kubeconfig="$work/kubeconfig" --node-name=metrics-node \
  --gpu-probe-paths="$work/no-gpu"
mkdir -p "$work/device-plugins" "$work/cdi"
start device-plugin "$bin/gvirtus-device-plugin" --kubelet-dir="$work/device-plugins" \
  --cdi-dir="$work/cdi"
webhook_port=$(free_port)
start webhook "$bin/gvirtus-webhook" --listen="127.0.0.1:$webhook_port" \
  --static-backends=127.0.0.1:9999 --tls-cert-file="$work/tls.crt" --tls-key-file="$work/tls.key"
mkdir -p "$work/gvirtus/lib"
shim_port=$(free_port)
# The shim's backend command after the shim's own flags; --health-addr goes before "--".
start_shim() {
  local port
  port=$(free_port)
  ports[backend-shim]=$port
  env -u POD_NAME -u POD_NAMESPACE "$bin/gvirtus-backend-shim" --port="$shim_port" \
    --config-out="$work/gvirtus/properties.json" --gvirtus-home="$work/gvirtus" \
    --nvml-library="$build/tests/libfake_nvml.so" --health-addr="127.0.0.1:$port" \
    --log-level=warn --peer-check=false -- "$build/tests/fake_gvirtus_backend" >"$work/backend-shim.log" 2>&1 &
  pids+=($!)
}
start_shim

# One admission of a GVirtuS pod, so that the webhook's per-result and per-backend counters
# have a sample (a family without one is not rendered).
review='{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"metrics-1",
 "kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},
 "namespace":"default","operation":"CREATE","object":{"apiVersion":"v1","kind":"Pod",
 "metadata":{"name":"app","namespace":"default","labels":{"gvirtus.io/enabled":"true"}},
 "spec":{"containers":[{"name":"app","image":"example/app"}]}}}}'
for _ in $(seq 1 40); do
  curl -ksS --max-time 2 -H 'Content-Type: application/json' -d "$review" \
    "https://127.0.0.1:$webhook_port/mutate" 2>/dev/null | grep -q '"allowed":true' && break
  sleep 0.5
done

# Scrapes each, until every family has shown up or 20 s have passed.
declare -A exported
deadline=$((SECONDS + 20))
for name in labeler device-plugin webhook backend-shim; do
  text=""
  while [ $SECONDS -lt $deadline ]; do
    text=$(curl -fsS --max-time 2 "http://127.0.0.1:${ports[$name]}/metrics" 2>/dev/null || true)
    # The shim's backend samples appear once it has looked at the backend.
    if [ -n "$text" ] && { [ "$name" != backend-shim ] || grep -q '^gvirtus_gpus [1-9]' <<<"$text"; }; then
      break
    fi
    sleep 0.5
  done
  if [ -z "$text" ]; then
    bad "$name: no /metrics on 127.0.0.1:${ports[$name]}; its log:"
    tail -5 "$work/$name.log" >&2
    continue
  fi
  # Sample names, and families announced by # TYPE (a family may have no sample yet).
  while read -r metric; do
    exported[$metric]=$name
  done < <(sed -nE 's/^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) .*/\1/p; s/^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ].*/\1/p' <<<"$text" | sort -u)
done

for metric in "${used[@]}"; do
  if [ -n "${exported[$metric]:-}" ]; then
    printf '  ok    %-55s %s\n' "$metric" "${exported[$metric]}" >&2
  else
    bad "$metric is used by monitoring/ but no binary exports it"
  fi
done
if [ "$failures" != 0 ]; then
  say "FAILED: $failures"
  exit 1
fi
say "passed: ${#used[@]} metric names"
