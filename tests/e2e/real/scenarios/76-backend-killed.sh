#!/usr/bin/env bash
# The GVirtuS backend process dies inside its pod: the shim sees the port stop
# listening, restarts the backend, counts the restart, and the pod is Ready again.
source "$(dirname "$0")/../../scenarios/lib.sh"
node=${E2E_BACKEND2_NODE:-gpu-b}
container=$(node_container "$node") || skip "node $node is not a Docker container here"
backend=$(jp pods -n "$system_ns" -l app.kubernetes.io/component=backend \
  --field-selector "spec.nodeName=$node" -o 'jsonpath={.items[0].metadata.name}')
[ -n "$backend" ] || { bad "no backend pod on $node"; finish; }
metric() {
  k get --raw "/api/v1/namespaces/$system_ns/pods/$backend:8080/proxy/metrics" | awk -v m="$1" '$1 == m {print $2}'
}
before=$(metric gvirtus_backend_restarts_total)
[ -n "$before" ] && ok "backend restarts so far: $before" || bad "no gvirtus_backend_restarts_total"
# The stand-in backend listens with socat; its processes are the node's children.
docker exec "$container" pkill -KILL -f 'socat TCP-LISTEN:9999' && ok "killed the backend process on $node" ||
  bad "no backend process to kill"
restarted() { [ "$(metric gvirtus_backend_restarts_total)" -gt "${before:-0}" ]; }
eventually "the shim restarted the backend (gvirtus_backend_restarts_total grew)" restarted
listening() { [ "$(metric gvirtus_backend_up)" = 1 ]; }
eventually "the backend listens again (gvirtus_backend_up 1)" listening
ready() {
  [ "$(jp pod "$backend" -n "$system_ns" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
eventually "the backend pod is Ready" ready
[ "$(jp pod "$backend" -n "$system_ns" -o 'jsonpath={.status.containerStatuses[0].restartCount}')" = 0 ] &&
  ok "the shim's container itself did not restart" || bad "the container restarted"
finish
