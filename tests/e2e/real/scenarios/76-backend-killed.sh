#!/usr/bin/env bash
# The GVirtuS backend's listener dies inside its pod while clients are connected: the
# shim sees the port stop listening (--sessions=shared) or the serving pods' processes end
# (per-pod, the default), restarts what died, counts it, and the backend serves again within
# seconds, not minutes. The stand-in binds as GVirtuS does
# (SO_REUSEADDR asked with a 1-byte value, which Linux refuses): alone it could not bind
# while the killed run's connections linger on the port (FIN_WAIT2, TIME_WAIT: one to two
# minutes); the library the shim preloads makes its request work.
# shellcheck source=../../scenarios/lib.sh
source "$(dirname "$0")/../../scenarios/lib.sh"
node=${E2E_BACKEND2_NODE:-gpu-b}
container=$(node_container "$node") || skip "node $node is not a Docker container here"
backend=$(jp pods -n "$system_ns" -l app.kubernetes.io/component=backend \
  --field-selector "spec.nodeName=$node" -o 'jsonpath={.items[0].metadata.name}')
[ -n "$backend" ] || { bad "no backend pod on $node"; finish; }
use_test_namespace
metric() {
  k get --raw "/api/v1/namespaces/$system_ns/pods/$backend:8080/proxy/metrics" | awk -v m="$1" '$1 == m {print $2}'
}
before=$(metric gvirtus_backend_restarts_total)
[ -n "$before" ] && ok "backend restarts so far: $before" || bad "no gvirtus_backend_restarts_total"
port_waits=$(metric gvirtus_backend_port_waits_total)
log=$(k logs -n "$system_ns" "$backend" 2>&1 || true)
if grep -q 'gvirtus-backend stand-in' <<<"$log"; then
  grep -q 'SO_REUSEADDR (1-byte value) set' <<<"$log" &&
    ok "the stand-in asks for SO_REUSEADDR with GVirtuS's 1-byte value; the shim's library makes it work" ||
    bad "the stand-in's 1-byte SO_REUSEADDR request was not set: $(grep -m1 SO_REUSEADDR <<<"$log")"
fi

# Clients that stay connected to this backend (frontend stand-ins naming it, as a pod may:
# the webhook honours the choice), so that the kill ends sessions that were being served.
# Each is waited for until its first ping was answered: a connection the backend counts
# may be a pod of an earlier scenario on its way out, whose end is no restart.
if [ "${E2E_BACKEND_ECHO:-0}" = 1 ]; then
  backend_ip=$(jp pod "$backend" -n "$system_ns" -o 'jsonpath={.status.podIP}')
  for i in 1 2; do
    test_pod "client-$i" "  labels: {gvirtus.io/enabled: \"true\"}
  annotations: {gvirtus.io/backend: \"$backend_ip:9999\"}" \
      '      command: ["gvirtus-frontend-standin"]' | k apply -f - >/dev/null
  done
  answered() { k logs -n "$test_ns" "$1" 2>/dev/null | grep -q '^backend answered'; }
  for i in 1 2; do
    eventually "client-$i is served by $backend (its first ping answered)" answered "client-$i" ||
      finish
  done
else
  say "E2E_BACKEND_ECHO is not 1: no clients connected to the backend"
fi

# The listening child and its sessions die; GVirtuS's parent (gvirtus-backend) lives on.
killed_at=$(date +%s%3N)
docker exec "$container" sh -c 'pkill -KILL -x gvirtus-listen && { pkill -KILL -x gvirtus-session; true; }' &&
  ok "killed the backend's listener and sessions on $node" || bad "no backend listener to kill"
# Read from the pod's network namespace: the killed run's sockets that are neither listening
# nor connected (FIN_WAIT2, TIME_WAIT, ...), which GVirtuS alone would fail to bind past.
lingering=$({ k exec -n "$system_ns" "$backend" -c backend -- cat /proc/net/tcp /proc/net/tcp6 ||
  true; } 2>/dev/null | awk '$2 ~ /:270F$/ && $4 != "0A" && $4 != "01" {n++} END {print n + 0}')
say "sockets of the killed run lingering on port 9999 just after the kill: $lingering"

# Listening again: a new backend started (restarts grew) and up. Timed from the kill.
listening_again() {
  local restarts up
  restarts=$(metric gvirtus_backend_restarts_total) && up=$(metric gvirtus_backend_up) &&
    [ "${restarts:-0}" -gt "${before:-0}" ] && [ "$up" = 1 ]
}
seconds=""
deadline=$((SECONDS + timeout_s))
while [ $SECONDS -lt $deadline ]; do
  if jp_lenient=1 listening_again 2>/dev/null; then
    seconds=$(awk -v ms=$(($(date +%s%3N) - killed_at)) 'BEGIN {printf "%.1f", ms / 1000}')
    break
  fi
  sleep 0.5
done
if [ -z "$seconds" ]; then
  bad "the backend did not listen again within ${timeout_s}s of the kill"
  # What the shim says now, into the run's log: its numbers and its last words.
  { k get --raw "/api/v1/namespaces/$system_ns/pods/$backend:8080/proxy/metrics" |
    grep '^gvirtus_backend_' || true; } |
    sed 's/^/    metric: /' >&2
  { k logs -n "$system_ns" "$backend" -c backend --tail=40 || true; } 2>&1 | sed 's/^/    log: /' >&2
elif awk -v s="$seconds" 'BEGIN {exit !(s < 15)}'; then
  ok "the backend listens again ${seconds}s after its listener was killed (under 15s)"
else
  bad "the backend listens again only ${seconds}s after its listener was killed (15s allowed)"
fi
[ "$(metric gvirtus_backend_port_waits_total)" = "$port_waits" ] &&
  ok "the new backend did not have to wait for its port" ||
  say "the new backend waited for its port (gvirtus_backend_port_waits_total grew)"
ready() {
  [ "$(jp pod "$backend" -n "$system_ns" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
eventually "the backend pod is Ready" ready
[ "$(jp pod "$backend" -n "$system_ns" -o 'jsonpath={.status.containerStatuses[0].restartCount}')" = 0 ] &&
  ok "the shim's container itself did not restart" || bad "the container restarted"
# The clients go now, not in the background: the next scenarios count the backends'
# sessions.
k delete pods -n "$test_ns" --all --wait=true --timeout=60s >/dev/null 2>&1 || true
finish
