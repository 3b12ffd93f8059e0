#!/usr/bin/env bash
# Frontends follow their backend (issue 39). A Deployment of 2 GVirtuS app pods, a Job
# (restartPolicy OnFailure) and a bare pod run against backend A: the other backends'
# nodes are opted out while they are admitted. A's pod is deleted and its DaemonSet
# creates a new one with a new address. The webhook's leader deletes the pods that have
# an owner, whose owners create new ones that are given a live backend, and marks the
# bare pod with a condition and an Event without deleting it. The test app logs the
# address of every connection it makes: no container connects to A's old address once
# A's pod was deleted.
# shellcheck source=../../scenarios/lib.sh
source "$(dirname "$0")/../../scenarios/lib.sh"
mapfile -t backends < <(jp pods -n "$system_ns" -l app.kubernetes.io/component=backend \
  -o 'jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.podIP}{"\n"}{end}' |
  awk 'NF == 3')
[ ${#backends[@]} -ge 1 ] || skip "needs a backend pod"
read -r a_pod a_node a_ip <<<"${backends[0]}"
others=()
for backend in "${backends[@]:1}"; do others+=("$(cut -d' ' -f2 <<<"$backend")"); done
use_test_namespace
logs=$(mktemp -d)
# The other backend nodes opted in again (the next scenarios want every backend), however
# this one ends.
restore() {
  stop_log_collector
  for node in "${others[@]}"; do
    k label node "$node" gvirtus.io/backend.allowed=true --overwrite >/dev/null 2>&1 || true
  done
  rm -rf "$logs"
}
trap 'restore; dump_on_failure; k delete namespace "$test_ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true' EXIT
backend_pods_on() {
  jp pods -n "$system_ns" -l app.kubernetes.io/component=backend --field-selector "spec.nodeName=$1" \
    -o 'jsonpath={.items[*].metadata.name}'
}

say "every frontend on $a_pod ($a_ip, node $a_node)"
for node in "${others[@]}"; do k label node "$node" gvirtus.io/backend.allowed=false --overwrite >/dev/null; done
only_a() {
  for node in "${others[@]}"; do [ -z "$(backend_pods_on "$node")" ] || return 1; done
}
eventually "the other backend nodes have no backend pod (${others[*]:-none})" only_a || finish
frontend='      containers:
        - name: app
          image: '"$test_image"'
          command: ["gvirtus-frontend-standin"]
          env: [{name: GVIRTUS_STANDIN_PING, value: "2"}]'
k apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: $test_ns}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, gvirtus.io/enabled: "true"}}
    spec:
      terminationGracePeriodSeconds: 1
$frontend
---
apiVersion: batch/v1
kind: Job
metadata: {name: job, namespace: $test_ns}
spec:
  backoffLimit: 20
  template:
    metadata: {labels: {app: job, gvirtus.io/enabled: "true"}}
    spec:
      restartPolicy: OnFailure
      terminationGracePeriodSeconds: 1
$frontend
---
apiVersion: v1
kind: Pod
metadata: {name: bare, namespace: $test_ns, labels: {app: bare, gvirtus.io/enabled: "true"}}
spec:
  terminationGracePeriodSeconds: 1
$(sed 's/^    //' <<<"$frontend")
YAML
# app=web|job|bare: "name uid backend-pod phase" per pod.
frontends() {
  jp pods -n "$test_ns" -l "app in (web, job, bare)" -o 'jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.metadata.annotations.gvirtus\.io/backend-pod} {.status.phase} {.metadata.deletionTimestamp}{"\n"}{end}'
}
connected_to() { # POD ADDRESS: its current container connected there
  k logs -n "$test_ns" "$1" 2>/dev/null | grep -q "connected to the backend $2:9999"
}
all_on_a() {
  local lines n=0 name uid backend phase deleting
  lines=$(frontends)
  while read -r name uid backend phase deleting; do
    [ -n "$name" ] || continue
    [ -z "$deleting" ] || continue
    [ "$backend" = "$system_ns/$a_pod" ] && [ "$phase" = Running ] && connected_to "$name" "$a_ip" || return 1
    n=$((n + 1))
  done <<<"$lines"
  [ "$n" = 4 ]
}
eventually "2 Deployment pods, the Job's pod and the bare pod connected to $a_ip" all_on_a || finish
before=$(frontends)
bare_uid=$(awk '$1 == "bare" {print $2}' <<<"$before")
# The backend of the other nodes back: the new pods may be given either backend.
for node in "${others[@]}"; do k label node "$node" gvirtus.io/backend.allowed=true --overwrite >/dev/null; done

start_log_collector "$logs"

say "deleting $a_pod"
# To the nanosecond: a container that connected earlier in the same second is no late
# connection (the owned pods' first connections often fall in the second of the delete).
deleted_at=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
start=$SECONDS
k delete pod "$a_pod" -n "$system_ns" --wait=false >/dev/null
new_a() {
  local pod
  pod=$(backend_pods_on "$a_node")
  [ -n "$pod" ] && [ "$pod" != "$a_pod" ] || return 1
  [ "$(jp pod "$pod" -n "$system_ns" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
eventually "the DaemonSet created a new backend pod on $a_node and it is Ready" new_a
new_ip=$(jp pods -n "$system_ns" -l app.kubernetes.io/component=backend --field-selector "spec.nodeName=$a_node" -o 'jsonpath={.items[0].status.podIP}')
[ "$new_ip" != "$a_ip" ] && ok "the new backend pod has a new address ($new_ip)" ||
  say "the new backend pod reuses $a_ip (the checks below still hold)"

# Each owned frontend again: a new pod (not one from before), Running, connected to the live
# backend its annotations name.
recovered() { # APP COUNT
  local lines n=0 name uid backend phase deleting ip
  lines=$(frontends)
  while read -r name uid backend phase deleting; do
    [ "${name%%-*}" = "$1" ] || continue
    [ -z "$deleting" ] || return 1
    grep -q " $uid " <<<"$before" && return 1
    [ "$phase" = Running ] && [ "$backend" != "$system_ns/$a_pod" ] || return 1
    ip=$(jp pod "${backend#*/}" -n "$system_ns" -o 'jsonpath={.status.podIP}')
    [ -n "$ip" ] && connected_to "$name" "$ip" || return 1
    n=$((n + 1))
  done <<<"$lines"
  [ "$n" = "$2" ]
}
eventually "the Deployment runs 2 new pods on a live backend" recovered web 2
eventually "the Job runs a new pod on a live backend" recovered job 1
say "all owned frontends running again $((SECONDS - start)) s after the backend pod was deleted"
events_of() { # REASON: "name" of each pod with such an Event
  jp events -n "$test_ns" --field-selector "reason=$1" -o 'jsonpath={range .items[*]}{.involvedObject.name}{"\n"}{end}'
}
recreated_events() { [ "$(events_of BackendLostRecreated | sort -u | grep -c .)" -ge 3 ]; }
eventually "Events BackendLostRecreated on the 3 owned pods from before" recreated_events

say "the bare pod: marked, not deleted"
marked() {
  [ "$(jp pod bare -n "$test_ns" -o 'jsonpath={.status.conditions[?(@.type=="gvirtus.io/BackendLost")].status}')" = True ]
}
eventually "condition gvirtus.io/BackendLost=True on the bare pod" marked
bare_event() { events_of BackendLost | grep -qx bare; }
eventually "a Warning Event BackendLost on the bare pod" bare_event
message=$(jp events -n "$test_ns" --field-selector reason=BackendLost,involvedObject.name=bare -o 'jsonpath={.items[0].message}')
grep -q "delete it" <<<"$message" && ok "its Event says what to do: ${message:0:160}" || bad "Event message: $message"
[ "$(jp pod bare -n "$test_ns" -o 'jsonpath={.metadata.uid} {.metadata.deletionTimestamp}')" = "$bare_uid " ] &&
  ok "the bare pod is the same pod, not being deleted" || bad "the bare pod was deleted or replaced"

say "no container of an owned pod connected to $a_ip after $deleted_at"
# The bare pod is left as it is (its properties.json keeps the old address): only the
# owned pods' containers count.
connections_since_delete() {
  cat "$logs"/web-*.log "$logs"/job-*.log 2>/dev/null | sort -u |
    awk -v t="$deleted_at" '
      # RFC 3339 with the fraction padded to 9 digits (kubelet trims trailing zeros), so
      # that the times compare as text.
      function nanos(time, fraction) {
        fraction = substr(time, 21)
        sub(/Z$/, "", fraction)
        return substr(time, 1, 19) "." substr(fraction "000000000", 1, 9)
      }
      nanos($1) >= nanos(t) && /connected to the backend/' || true
}
# The collector follows a new pod's log a few seconds after it starts, and the Job's pod
# can start last (its controller waits for the old pod to end): its connection is waited
# for in the collected files before the collector stops.
three_logged() { [ "$(connections_since_delete | grep -c .)" -ge 3 ]; }
eventually "3 connections of owned pods logged since the deletion" three_logged
stop_log_collector
after=$(connections_since_delete)
late=$(grep "connected to the backend $a_ip:9999" <<<"$after" || true)
if [ "$new_ip" = "$a_ip" ]; then
  say "the new backend pod reuses the old address: connections to it are to a live backend"
else
  [ -z "$late" ] && ok "none to the old address" || bad "connected to the old address: $late"
fi
# The next scenarios start with every backend Ready, as before this one.
all_ready() {
  [ "$(jp pods -n "$system_ns" -l app.kubernetes.io/component=backend \
    -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -c True)" -ge ${#backends[@]} ]
}
eventually "${#backends[@]} backend pods Ready again" all_ready
finish
