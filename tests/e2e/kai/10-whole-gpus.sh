#!/usr/bin/env bash
# GVirtuS pods scheduled by KAI-Scheduler (whole virtual GPUs): the webhook sends a
# GVirtuS pod to kai-scheduler in queue team-a; while no backend can take it, it stays
# gated and KAI does not bind it; once a backend can, our controller releases it, the
# podgrouper gives it a PodGroup and KAI binds it onto a frontend node with a virtual
# GPU, where it runs. Queue quotas hold: in team-b (1 GPU) a second pod stays Pending
# for KAI's reason, while our annotations show it has its backend.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
sole_backend_node

say "no backend: $node opted out"
k label node "$node" gvirtus.io/backend.allowed=false --overwrite >/dev/null
eventually "no backend pod left" no_backend || finish
test_pod kai-1 '  labels: {gvirtus.io/enabled: "true"}' "" | k apply -f - >/dev/null 2>&1
[ "$(field kai-1 '{.spec.schedulerName}')" = kai-scheduler ] && ok "schedulerName kai-scheduler" ||
  bad "schedulerName: $(field kai-1 '{.spec.schedulerName}')"
[ "$(field kai-1 '{.metadata.labels.kai\.scheduler/queue}')" = team-a ] && ok "queue team-a" ||
  bad "labels: $(field kai-1 '{.metadata.labels}')"
[ "$(field kai-1 '{.spec.schedulingGates[*].name}')" = gvirtus.io/backend ] && ok "gated while no backend can take it" ||
  bad "gates: $(field kai-1 '{.spec.schedulingGates}')"
# KAI looks at every pod it knows in each session: once it has bound a plain pod created
# after kai-1, it has looked at kai-1 too.
test_pod kai-canary '  labels: {kai.scheduler/queue: team-a}' "" |
  sed 's/^spec:$/spec:\n  schedulerName: kai-scheduler/' | k apply -f - >/dev/null
bound() { [ -n "$(field "$1" '{.spec.nodeName}')" ]; }
eventually "KAI binds a plain pod created after kai-1" bound kai-canary
[ -z "$(field kai-1 '{.spec.nodeName}')" ] && ok "KAI did not bind the gated pod" || bad "bound while gated to $(field kai-1 '{.spec.nodeName}')"
k delete pod kai-canary -n "$test_ns" --wait=false >/dev/null

say "a backend appears: $node opted in"
k label node "$node" gvirtus.io/backend.allowed=true --overwrite >/dev/null
released() { [ -z "$(field kai-1 '{.spec.schedulingGates}')" ] && [ -n "$(field kai-1 '{.metadata.annotations.gvirtus\.io/backend}')" ]; }
eventually "released by our controller with a backend" released
has_podgroup() { [ -n "$(field kai-1 '{.metadata.annotations.pod-group-name}')" ]; }
eventually "the podgrouper gave it a PodGroup" has_podgroup
group=$(field kai-1 '{.metadata.annotations.pod-group-name}')
k get podgroups.scheduling.run.ai -n "$test_ns" "$group" >/dev/null 2>&1 && ok "PodGroup $group exists" || bad "no PodGroup $group"
eventually "bound by KAI and running" running kai-1
bound=$(field kai-1 '{.spec.nodeName}')
[ "$(k get node "$bound" -o 'jsonpath={.status.allocatable.nvidia\.com/gpu}')" -gt 0 ] 2>/dev/null &&
  ok "on $bound, a frontend with virtual GPUs" || bad "on $bound"
releases=$(k get events -n "$test_ns" --field-selector involvedObject.name=kai-1,reason=BackendAssigned -o name | wc -l)
[ "$releases" = 1 ] && ok "exactly one BackendAssigned Event (no double release)" || bad "$releases BackendAssigned Events"

say "queue team-b allows 1 GPU: a second pod waits for KAI, not for us"
for i in 1 2; do
  test_pod "team-b-$i" '  labels: {gvirtus.io/enabled: "true", kai.scheduler/queue: team-b}' "" | k apply -f - >/dev/null 2>&1
done
# Both are created at once: KAI binds whichever it takes first, the other is over quota.
one_runs() { running team-b-1 || running team-b-2; }
eventually "one of team-b-1, team-b-2 runs" one_runs
if running team-b-1; then first=team-b-1 second=team-b-2; else first=team-b-2 second=team-b-1; fi
# KAI's Event on the second is the session that looked at it and left it Pending.
kai_reason() {
  k get events -n "$test_ns" --field-selector "involvedObject.name=$second" -o 'jsonpath={range .items[*]}{.source.component}{.reportingComponent} {.reason}: {.message}{"\n"}{end}' |
    grep -i kai
}
eventually "KAI says why (an Event from kai-scheduler)" kai_reason
[ "$(field "$second" '{.status.phase}')" = Pending ] && [ -z "$(field "$second" '{.spec.nodeName}')" ] &&
  ok "$second stays Pending over the queue's GPU limit ($first runs)" ||
  bad "$second: $(field "$second" '{.status.phase}') on $(field "$second" '{.spec.nodeName}')"
[ -n "$(field "$second" '{.metadata.annotations.gvirtus\.io/backend}')" ] && [ -z "$(field "$second" '{.spec.schedulingGates}')" ] &&
  ok "our side is done: it has its backend, no gate" || bad "$second annotations: $(field "$second" '{.metadata.annotations}')"
say "KAI's reason: $(kai_reason | head -n 1)"
finish
