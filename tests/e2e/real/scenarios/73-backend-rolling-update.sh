#!/usr/bin/env bash
# Backends are upgraded without cutting sessions (issue 39). GVirtuS app pods hold
# sessions on every backend; the backend DaemonSet is rolled (kubectl rollout restart:
# a new pod template, as a new image or new flags are). Each old backend pod drains: it
# takes no new session and no new pod, and the sessions it holds run on until they end
# or --drain-timeout. No session is cut before the drain timeout. Once the old pod is
# gone, its frontends are recreated on a live backend.
# shellcheck source=../../scenarios/lib.sh
source "$(dirname "$0")/../../scenarios/lib.sh"
ds=gvirtus-backend
# The backend pods serving now (not one still going from an earlier scenario).
mapfile -t backends < <(jp pods -n "$system_ns" -l app.kubernetes.io/component=backend \
  -o 'jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}' |
  awk 'NF == 1')
[ ${#backends[@]} -ge 1 ] || skip "needs a backend pod"
drain=$(jp daemonset "$ds" -n "$system_ns" -o 'jsonpath={.spec.template.spec.containers[0].args}' |
  grep -oE -- '--drain-timeout=[0-9]+s' | grep -oE '[0-9]+' || true)
grace=$(jp daemonset "$ds" -n "$system_ns" -o 'jsonpath={.spec.template.spec.terminationGracePeriodSeconds}')
[ -n "$drain" ] && [ -n "$grace" ] || { bad "no --drain-timeout or grace period on $ds"; finish; }
replicas=$((2 * ${#backends[@]}))
use_test_namespace
logs=$(mktemp -d)
watcher=""
trap '[ -z "$watcher" ] || kill "$watcher" 2>/dev/null || true; stop_log_collector; rm -rf "$logs"; dump_on_failure; k delete namespace "$test_ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true' EXIT

say "$replicas frontends with sessions on ${#backends[@]} backends (drain ${drain}s, grace ${grace}s)"
k apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: $test_ns}
spec:
  replicas: $replicas
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, gvirtus.io/enabled: "true"}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: app
          image: $test_image
          command: ["gvirtus-frontend-standin"]
          env: [{name: GVIRTUS_STANDIN_PING, value: "1"}]
YAML
# "name uid backend-pod phase deletionTimestamp" per app pod.
frontends() {
  jp pods -n "$test_ns" -l app=web -o 'jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.metadata.annotations.gvirtus\.io/backend-pod} {.status.phase} {.metadata.deletionTimestamp}{"\n"}{end}'
}
connected() {
  local lines n=0 name uid backend phase deleting
  lines=$(frontends)
  while read -r name uid backend phase deleting; do
    [ -n "$name" ] && [ -z "$deleting" ] && [ "$phase" = Running ] || continue
    k logs -n "$test_ns" "$name" 2>/dev/null | grep -q "backend answered" && n=$((n + 1))
  done <<<"$lines"
  [ "$n" = "$replicas" ]
}
eventually "$replicas frontends connected and answered" connected || finish
before=$(frontends)
start_log_collector "$logs"

say "kubectl rollout restart daemonset/$ds"
watch_deletions() { # every terminating backend pod: "name deletionTimestamp", once
  while :; do
    jp_lenient=1 jp pods -n "$system_ns" -l app.kubernetes.io/component=backend \
      -o 'jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}' |
      awk -v serving=" ${backends[*]} " 'NF == 2 && index(serving, " " $1 " ")' >>"$logs/deletions"
    sleep 1
  done
}
watch_deletions &
watcher=$!
rolled_at=$(date -u +%Y-%m-%dT%H:%M:%S)
k rollout restart daemonset "$ds" -n "$system_ns" >/dev/null
first_draining() { awk 'NF == 2 {print $1; exit}' "$logs/deletions" | grep -q .; }
eventually "an old backend pod drains" first_draining
draining=$(awk 'NF == 2 {print $1; exit}' "$logs/deletions")
say "a new GVirtuS pod while $draining drains"
test_pod late '  labels: {gvirtus.io/enabled: "true"}' "" | k apply -f - >/dev/null
given() { [ -n "$(jp pod late -n "$test_ns" -o 'jsonpath={.metadata.annotations.gvirtus\.io/backend-pod}')" ]; }
eventually "the new pod is given a backend" given
late_backend=$(jp pod late -n "$test_ns" -o 'jsonpath={.metadata.annotations.gvirtus\.io/backend-pod}')
late_created=$(jp pod late -n "$test_ns" -o 'jsonpath={.metadata.creationTimestamp}')
epoch() { date -u -d "$1" +%s; }
# Given at admission (its creation): was its backend pod deleted (its deletionTimestamp less
# the grace period) by then?
stamp=$(awk -v p="${late_backend#*/}" '$1 == p {print $2; exit}' "$logs/deletions")
if [ -n "$stamp" ] && [ $(($(epoch "$stamp") - grace)) -le "$(epoch "$late_created")" ]; then
  bad "the new pod was given $late_backend, draining since $(date -u -d "@$(($(epoch "$stamp") - grace))" +%T)"
else
  ok "the new pod was given $late_backend, not a draining backend"
fi
rolled() { k rollout status daemonset "$ds" -n "$system_ns" --timeout=5s >/dev/null 2>&1; }
timeout_s=$((timeout_s + ${#backends[@]} * (grace + 30))) eventually "the rollout completes" rolled
old_gone() {
  local pod
  for pod in "${backends[@]}"; do
    [ -z "$(jp pod "$pod" -n "$system_ns" -o 'jsonpath={.metadata.name}')" ] || return 1
  done
}
eventually "the old backend pods are gone (each drained)" old_gone
kill "$watcher" 2>/dev/null || true

say "no session cut before the drain timeout"
# Each old frontend: when its backend pod was deleted (deletionTimestamp less the grace
# period), and when the app first saw its session end.
while read -r name uid backend phase deleting; do
  [ -n "$name" ] || continue
  stamp=$(awk -v p="${backend#*/}" '$1 == p {print $2; exit}' "$logs/deletions")
  [ -n "$stamp" ] || { bad "$name: its backend ${backend#*/} was never seen deleting"; continue; }
  deleted=$(($(epoch "$stamp") - grace))
  ended=$(sort -u "$logs/$name.log" 2>/dev/null |
    awk -v t="$rolled_at" '$1 >= t && /stopped answering|cannot connect/ {print $1; exit}' || true)
  if [ -z "$ended" ]; then
    bad "$name: no end of its session logged"
    continue
  fi
  held=$(($(epoch "$ended") - deleted))
  [ "$held" -ge $((drain - 2)) ] && ok "$name: its session held ${held}s after ${backend#*/} was deleted (drain ${drain}s)" ||
    bad "$name: its session was cut ${held}s after ${backend#*/} was deleted, before the ${drain}s drain timeout"
done <<<"$before"

say "the frontends run again on the new backends"
recovered() {
  local lines n=0 name uid backend phase deleting
  lines=$(frontends)
  while read -r name uid backend phase deleting; do
    [ -n "$name" ] || continue
    [ -z "$deleting" ] && [ "$phase" = Running ] || return 1
    grep -q " $uid " <<<"$before" && return 1
    grep -q "^${backend#*/} " "$logs/deletions" && return 1
    n=$((n + 1))
  done <<<"$lines"
  [ "$n" = "$replicas" ]
}
eventually "$replicas new frontend pods Running on new backend pods" recovered
finish
