#!/usr/bin/env bash
# A gang on remote GPUs: four GVirtuS pods of one KAI PodGroup (minMember 4) are
# released together or not at all. With one backend of 3 sessions none is released (no
# partial gang holding sessions) and their Event says why; when a second backend
# appears, all four are released in one pass and KAI binds them.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
second=${E2E_BACKEND2_NODE:?}
restore() { k label node "$second" gvirtus.io/backend.allowed=false --overwrite >/dev/null 2>&1 || true; }
trap 'dump_on_failure; restore; k delete namespace "$test_ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true' EXIT
# Ready, and already the overlay's backend: its load says 3 sessions (an older backend
# pod of 16 sessions would take the whole gang at once).
backend_ready() {
  local selector=(-n "$system_ns" -l app.kubernetes.io/component=backend --field-selector "spec.nodeName=$1")
  [ "$(k get pods "${selector[@]}" -o 'jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}')" = True ] &&
    k get pods "${selector[@]}" -o 'jsonpath={.items[*].metadata.annotations.gvirtus\.io/load}' |
    grep -q '"maxSessions":3[,}]'
}
k label node "$second" gvirtus.io/backend.allowed=false --overwrite >/dev/null
k label node "$node" gvirtus.io/backend.allowed=true --overwrite >/dev/null
eventually "one backend ready, on $node (3 sessions)" backend_ready "$node" || finish

k apply -f - >/dev/null <<YAML
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: trainers, namespace: $test_ns}
spec: {minMember: 4, queue: team-a}
YAML
for i in 1 2 3 4; do
  test_pod "trainer-$i" '  labels: {gvirtus.io/enabled: "true"}
  annotations: {pod-group-name: trainers}' "" | k apply -f - >/dev/null 2>&1
done
gated() { [ "$(field "$1" '{.spec.schedulingGates[*].name}')" = gvirtus.io/backend ]; }
told() {
  k get events -n "$test_ns" --field-selector "involvedObject.name=$1,reason=WaitingForBackend" \
    -o 'jsonpath={.items[*].message}' | grep -q "released whole"
}
# The Event comes from the pass that looked at the whole gang and held it back.
eventually "trainer-4 is told why it waits (the gang goes whole)" told trainer-4
for i in 1 2 3 4; do
  gated "trainer-$i" && ok "trainer-$i still gated, no backend held" ||
    bad "trainer-$i: gates $(field "trainer-$i" '{.spec.schedulingGates}'), backend $(field "trainer-$i" '{.metadata.annotations.gvirtus\.io/backend}')"
done
say "why: $(k get events -n "$test_ns" --field-selector involvedObject.name=trainer-1,reason=WaitingForBackend -o 'jsonpath={.items[0].message}')"

say "a second backend appears on $second"
k label node "$second" gvirtus.io/backend.allowed=true --overwrite >/dev/null
all_released() {
  local i
  for i in 1 2 3 4; do [ -n "$(field "trainer-$i" '{.metadata.annotations.gvirtus\.io/backend}')" ] || return 1; done
}
eventually "all four released" all_released
# The Events follow the release patch: wait for all four before comparing their times.
assigned_at() {
  k get events -n "$test_ns" --field-selector "involvedObject.name=$1,reason=BackendAssigned" \
    -o 'jsonpath={range .items[*]}{.firstTimestamp}{"\n"}{end}' | grep -m1 -E '^[0-9]{4}-'
}
all_told() { local i; for i in 1 2 3 4; do assigned_at "trainer-$i" >/dev/null || return 1; done; }
eventually "a BackendAssigned Event on each trainer" all_told
passes=$(for i in 1 2 3 4; do assigned_at "trainer-$i" || echo "missing-$i"; done | sort -u | wc -l)
[ "$passes" -le 2 ] && ok "released together (their BackendAssigned Events within one second)" ||
  bad "released at $passes different seconds"
for i in 1 2 3 4; do eventually "trainer-$i bound by KAI and running" running "trainer-$i"; done
finish
