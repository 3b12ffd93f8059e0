#!/usr/bin/env bash
# A backend appears and the waiting pod is released: E2E_BACKEND_NODE is opted in
# (gvirtus.io/backend.allowed=true, nvidia.com/gpu.present=true), the backend pod gets
# ready there, and the waiting GVirtuS pod gets its backend (IP:9999 of that pod), loses
# its gate and an Event, and runs with /etc/gvirtus/properties.json naming the backend.
# A GVirtuS pod created afterwards gets the backend at once. With E2E_BACKEND_ECHO=1 (the
# stand-in backend echoes bytes) a GVirtuS pod reaches port 9999, and a frontend
# stand-in that stays connected is counted in the backend's load; with
# E2E_NETWORK_POLICY=1 (the network plugin enforces NetworkPolicy) a plain pod cannot.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
node=${E2E_BACKEND_NODE:-}
[ -n "$node" ] || skip "E2E_BACKEND_NODE is not set (no node may become a backend)"
use_test_namespace
previous=$(jp node "$node" -o jsonpath='{.metadata.labels.gvirtus\.io/backend\.allowed}')
restore() {
  k label node "$node" "gvirtus.io/backend.allowed=${previous:-false}" --overwrite >/dev/null 2>&1 || true
}
trap 'dump_on_failure; restore; k delete namespace "$test_ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true' EXIT

backend_pod() {
  k get pods -n "$system_ns" -l app.kubernetes.io/component=backend --field-selector "spec.nodeName=$node" \
    -o jsonpath='{.items[0].metadata.name}' 2>/dev/null
}
no_backend() { [ -z "$(backend_pod)" ]; }
say "no backend on $node yet"
k label node "$node" gvirtus.io/backend.allowed=false nvidia.com/gpu.present=true --overwrite >/dev/null
eventually "no backend pod on $node" no_backend

gvirtus_labels="  labels:
    gvirtus.io/enabled: \"true\""
test_pod first "$gvirtus_labels" "" | k apply -f - >/dev/null 2>&1
field() { jp pod "$1" -n "$test_ns" -o "jsonpath=$2"; }
[ "$(field first '{.metadata.annotations.gvirtus\.io/backend-status}')" = waiting ] &&
  ok "the first pod waits" || bad "first pod is not waiting: $(field first '{.metadata.annotations}')"

say "opting $node in as a backend"
k label node "$node" gvirtus.io/backend.allowed=true --overwrite >/dev/null
backend_ready() {
  local pod
  pod=$(backend_pod)
  [ -n "$pod" ] && [ "$(jp pod "$pod" -n "$system_ns" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
eventually "backend pod ready on $node" backend_ready || finish
pod=$(backend_pod)
ip=$(jp pod "$pod" -n "$system_ns" -o jsonpath='{.status.podIP}')
load_published() { [ -n "$(jp pod "$pod" -n "$system_ns" -o jsonpath='{.metadata.annotations.gvirtus\.io/load}')" ]; }
eventually "the shim publishes gvirtus.io/load on $pod" load_published

released() { [ -z "$(field first '{.spec.schedulingGates}')" ]; }
eventually "the waiting pod is released (gate removed)" released
[ "$(field first '{.metadata.annotations.gvirtus\.io/backend}')" = "$ip:9999" ] &&
  ok "gvirtus.io/backend=$ip:9999" || bad "backend annotation: $(field first '{.metadata.annotations.gvirtus\.io/backend}')"
[ "$(field first '{.metadata.annotations.gvirtus\.io/backend-pod}')" = "$system_ns/$pod" ] &&
  ok "gvirtus.io/backend-pod=$system_ns/$pod" || bad "backend-pod: $(field first '{.metadata.annotations.gvirtus\.io/backend-pod}')"
events=$(k get events -n "$test_ns" --field-selector involvedObject.name=first -o jsonpath='{range .items[*]}{.reason} {.source.component}{.reportingComponent}{"\n"}{end}')
grep -qi gvirtus <<<"$events" && ok "an Event from the webhook on the pod" || bad "no gvirtus Event: $events"
running() { [ "$(field "$1" '{.status.phase}')" = Running ]; }
eventually "the released pod runs" running first
# Where pods have no real containers (kwok: E2E_NO_EXEC=1), read what the downwardAPI
# volume projects into the file: the pod's gvirtus.io/properties annotation.
if [ "${E2E_NO_EXEC:-0}" = 1 ]; then
  properties=$(jp pod first -n "$test_ns" -o 'jsonpath={.metadata.annotations.gvirtus\.io/properties}')
else
  properties=$(k exec -n "$test_ns" first -- cat /etc/gvirtus/properties.json 2>&1 || true)
fi
[[ $properties == *"\"server_address\":\"$ip\""* || $properties == *"\"server_address\": \"$ip\""* ]] &&
  ok "/etc/gvirtus/properties.json names $ip" || bad "properties.json: $properties"

say "a new GVirtuS pod gets the backend at once"
test_pod second "$gvirtus_labels" "" | k apply -f - >/dev/null 2>&1
[ -z "$(field second '{.spec.schedulingGates}')" ] && [ "$(field second '{.metadata.annotations.gvirtus\.io/backend}')" = "$ip:9999" ] &&
  ok "second pod: backend $ip:9999, no gate" || bad "second pod: $(field second '{.metadata.annotations}')"
eventually "the second pod runs" running second

if [ "${E2E_BACKEND_ECHO:-0}" = 1 ]; then
  reply=$(k exec -n "$test_ns" second -- timeout 5 tcp-echo-probe "$ip" 9999 2>&1 || true)
  [ "$reply" = gvirtus ] && ok "a GVirtuS pod reaches $ip:9999" || bad "GVirtuS pod to $ip:9999: $reply"
  # A frontend that stays connected, as GVirtuS's does: the shim counts it from the
  # backend pod's own network namespace and publishes it in gvirtus.io/load.
  test_pod frontend "$gvirtus_labels" '      command: ["gvirtus-frontend-standin"]' | k apply -f - >/dev/null 2>&1
  eventually "the frontend stand-in runs" running frontend
  connected() { k logs -n "$test_ns" frontend | grep -q "backend answered"; }
  eventually "the frontend stand-in read properties.json and connected to $ip:9999" connected
  counted() {
    jp pod "$pod" -n "$system_ns" -o 'jsonpath={.metadata.annotations.gvirtus\.io/load}' |
      grep -qE '"connections":[1-9]'
  }
  eventually "the backend's gvirtus.io/load counts the connection" counted
fi
if [ "${E2E_NETWORK_POLICY:-0}" = 1 ]; then
  test_pod outsider "" "" | k apply -f - >/dev/null 2>&1
  eventually "the plain pod runs" running outsider
  reply=$(k exec -n "$test_ns" outsider -- timeout 5 tcp-echo-probe "$ip" 9999 2>&1 || true)
  [ "$reply" != gvirtus ] && ok "a plain pod cannot reach $ip:9999 (NetworkPolicy)" ||
    bad "a plain pod reached the backend"
fi
finish
