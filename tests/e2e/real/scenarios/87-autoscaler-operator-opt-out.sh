#!/usr/bin/env bash
# An operator's decision stands (docs/operations.md, "Autoscaling backends"). The webhook
# runs its autoscaler (overlays/autoscale's RBAC, the flags added to the Deployment) with
# E2E_BACKEND2_NODE its one candidate and no backend anywhere: a waiting GVirtuS pod makes
# the leader opt the node in. The operator opts it out
# (`kubectl label node N gvirtus.io/backend.allowed=false --overwrite`) and it stays out
# while pods wait: the leader's look sees the due pods and the node held, and two more of
# its passes change nothing. Removing gvirtus.io/autoscaled hands the node back: it is
# opted in again. At the exit the webhook, the nodes and their backends are as they were.
# shellcheck source=../../scenarios/lib.sh
source "$(dirname "$0")/../../scenarios/lib.sh"
repo=$(cd "$(dirname "$0")/../../../.." && pwd)
other=${E2E_BACKEND_NODE:-}
node=${E2E_BACKEND2_NODE:-}
[ -n "$other" ] && [ -n "$node" ] || skip "needs two backend nodes (E2E_BACKEND_NODE, E2E_BACKEND2_NODE)"
args_before=$(jp deployment gvirtus-webhook -n "$system_ns" -o 'jsonpath={.spec.template.spec.containers[0].args}')
[ -n "$args_before" ] || { bad "cannot read the webhook's arguments"; finish; }
! grep -q autoscale-candidates <<<"$args_before" || skip "the webhook already runs an autoscaler"
allowed() { jp node "$1" -o 'jsonpath={.metadata.labels.gvirtus\.io/backend\.allowed}'; }
stamp() { jp node "$node" -o 'jsonpath={.metadata.annotations.gvirtus\.io/autoscaled}'; }
# offered: backend pods Ready and not being deleted, those the webhook offers.
offered() {
  k get pods -n "$system_ns" -l app.kubernetes.io/component=backend -o \
    'jsonpath={range .items[*]}{.metadata.deletionTimestamp}/{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -c '^/True$'
}
other_was=$(allowed "$other") node_was=$(allowed "$node") offered_before=$(offered || true)

restore() {
  k patch deployment gvirtus-webhook -n "$system_ns" --type=json -p \
    "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/args\",\"value\":$args_before}]" >/dev/null 2>&1 || true
  k rollout status deployment/gvirtus-webhook -n "$system_ns" --timeout=180s >/dev/null 2>&1 || true
  k delete -f "$repo/overlays/autoscale/rbac.yaml" --ignore-not-found >/dev/null 2>&1 || true
  k annotate node "$node" gvirtus.io/autoscaled- gvirtus.io/backend.draining- >/dev/null 2>&1 || true
  k label node "$node" gvirtus.io/backend.candidate- >/dev/null 2>&1 || true
  [ -z "$other_was" ] || k label node "$other" "gvirtus.io/backend.allowed=$other_was" --overwrite >/dev/null 2>&1 || true
  [ -z "$node_was" ] || k label node "$node" "gvirtus.io/backend.allowed=$node_was" --overwrite >/dev/null 2>&1 || true
  # The later scenarios count the backends: wait for as many to be offered again.
  local _
  for _ in $(seq 1 "$timeout_s"); do [ "$(offered || true)" = "$offered_before" ] && return 0; sleep 1; done
  say "restore: $(offered || true) backends offered, $offered_before before"
}
use_test_namespace
trap 'dump_on_failure; restore; k delete namespace "$test_ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true' EXIT

say "no backend: $other and $node opted out, $node the autoscaler's one candidate"
k label node "$other" gvirtus.io/backend.allowed=false --overwrite >/dev/null
k label node "$node" gvirtus.io/backend.allowed=false gvirtus.io/backend.candidate=true --overwrite >/dev/null
k annotate node "$node" gvirtus.io/autoscaled- gvirtus.io/backend.draining- >/dev/null 2>&1 || true
no_backend() { [ "$(offered)" = 0 ]; }
eventually "no backend offered (every backend pod gone or going)" no_backend || finish

say "the webhook's autoscaler on (at most 1 node, pods due after 5s, debug looks)"
k apply -f "$repo/overlays/autoscale/rbac.yaml" >/dev/null
arg() { printf '{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"%s"}' "$1"; }
k patch deployment gvirtus-webhook -n "$system_ns" --type=json -p "[$(arg --autoscale-candidates=gvirtus.io/backend.candidate=true),
  $(arg --autoscale-max=1), $(arg --scale-up-after=5s), $(arg --scale-down-after=10m), $(arg --log-level=debug)]" >/dev/null
k rollout status deployment/gvirtus-webhook -n "$system_ns" --timeout=180s >/dev/null &&
  ok "webhook rolled out with the autoscaler" || { bad "webhook rollout with the autoscaler"; finish; }

test_pod waiter-1 '  labels: {gvirtus.io/enabled: "true"}' "" | k apply -f - >/dev/null
opted_in() { [ "$(allowed "$node")" = true ] && [ -n "$(stamp)" ]; }
eventually "the leader opts $node in for waiter-1 (gvirtus.io/autoscaled)" opted_in || finish
first_stamp=$(stamp)

say "the operator opts $node out; new pods wait"
k label node "$node" gvirtus.io/backend.allowed=false --overwrite >/dev/null
# Its backend pod drains and goes: until then the webhook could still give it out.
eventually "no backend offered once $node's backend pod is gone" no_backend || finish
test_pod waiter-2 '  labels: {gvirtus.io/enabled: "true"}' "" | k apply -f - >/dev/null
test_pod waiter-3 '  labels: {gvirtus.io/enabled: "true"}' "" | k apply -f - >/dev/null

leader() { jp lease gvirtus-webhook -n "$system_ns" -o jsonpath='{.spec.holderIdentity}'; }
# metric NAME: "LEADER VALUE" from the Lease holder's metrics.
metric() {
  local holder
  holder=$(leader)
  [ -n "$holder" ] && k get --raw "/api/v1/namespaces/$system_ns/pods/$holder:8080/proxy/metrics" |
    awk -v m="$1" -v l="$holder" '$1 == m {print l, $2}' | grep .
}
# The leader's look that saw pods due and the node held, and opted nothing in.
held_look() {
  k logs -n "$system_ns" "$(leader)" | grep -F '"msg":"autoscaler looked"' | grep -F '"held":1' |
    grep -F '"optedIn":0' | grep -qE '"due":[1-9]'
}
eventually "the leader looked: pods due, $node held by the operator, nothing opted in" held_look || finish
looked=$(metric gvirtus_webhook_release_passes_total) ups=$(metric 'gvirtus_webhook_autoscale_events_total{direction="up"}')
two_more() {
  local now
  now=$(metric gvirtus_webhook_release_passes_total) || return 1
  [ -n "$looked" ] && [ "${now% *}" = "${looked% *}" ] &&
    awk -v a="${now#* }" -v b="${looked#* }" 'BEGIN {exit !(a >= b + 2)}'
}
eventually "two more passes of the same leader (${looked:-none})" two_more
[ "$(allowed "$node")" = false ] && [ "$(stamp)" = "$first_stamp" ] &&
  ok "$node stays out: allowed=false, gvirtus.io/autoscaled still $first_stamp" ||
  bad "$node: allowed=$(allowed "$node"), gvirtus.io/autoscaled $(stamp) (was $first_stamp)"
[ -n "$ups" ] && [ "$(metric 'gvirtus_webhook_autoscale_events_total{direction="up"}')" = "$ups" ] &&
  ok "no opt-in by the leader since ($ups)" ||
  bad "opt-ins: $(metric 'gvirtus_webhook_autoscale_events_total{direction="up"}'), ${ups:-none} before"
[ -n "$(jp pod waiter-2 -n "$test_ns" -o 'jsonpath={.spec.schedulingGates[*].name}')" ] &&
  ok "waiter-2 still waits (gated)" || bad "waiter-2 released: no backend should exist"

say "the operator hands $node back: gvirtus.io/autoscaled removed"
k annotate node "$node" gvirtus.io/autoscaled- >/dev/null
again() { opted_in && [ "$(stamp)" != "$first_stamp" ]; }
eventually "the autoscaler opts $node in again, with a new gvirtus.io/autoscaled" again
finish
