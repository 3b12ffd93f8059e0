#!/usr/bin/env bash
# DRA claims under KAI-Scheduler v0.12.0 (issue 38, docs/dra.md), tried rather than read.
# KAI allocates claims itself (its binder writes the allocation and the reservation) with
# the upstream allocator and no optional feature. With overlays/dra's changes on and the
# one opted-in backend's one GPU of 16Gi:
# - a claim that asks for memory (consumable capacity) is never allocated: KAI's Event
#   says the DRAConsumableCapacity feature is disabled;
# - of two pods with a claim for the device whole (no capacity asked), one runs on a
#   frontend node (the slice's node selector holds), its properties.json naming that GPU,
#   its claim holding no share of it; the other stays Pending: the device, which
#   kube-scheduler shares among claims (79), goes whole to one claim.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=../real/dra_lib.sh
source "$(dirname "$0")/../real/dra_lib.sh"
repo=$(cd "$(dirname "$0")/../../.." && pwd)
k get deviceclasses.resource.k8s.io >/dev/null 2>&1 || skip "the API server serves no resource.k8s.io/v1"
cleanup() {
  k delete namespace "$test_ns" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
  DRA_OVERLAY=tests/e2e/overlay-kai bash "$repo/tests/e2e/real/dra.sh" off || say "could not put the install back"
}
sole_backend_node
k label node "$node" gvirtus.io/backend.allowed=true --overwrite >/dev/null

bash "$repo/tests/e2e/real/dra.sh" on && ok "overlays/dra's changes on, over the KAI install" ||
  { bad "overlays/dra's changes did not roll out"; finish; }
one_slice() {
  [ "$(k get resourceslices -o json | jq '[.items[] | select(.spec.driver == "gpu.gvirtus.io")] | length')" = 1 ]
}
eventually "the backend's GPU is published" one_slice || finish
{ claim_template gpu-4gi 4Gi; claim_template gpu-whole; } | k apply -f - >/dev/null
# kai_claim_pod NAME TEMPLATE: a pod for kai-scheduler in queue team-a, with a claim.
kai_claim_pod() {
  test_pod "$1" '  labels: {gvirtus.io/dra: "true", kai.scheduler/queue: team-a}' "      resources: {claims: [{name: gpu}]}
  schedulerName: kai-scheduler
  resourceClaims: [{name: gpu, resourceClaimTemplateName: $2}]" | k apply -f - >/dev/null
}
kai_events() {
  k get events -n "$test_ns" --field-selector "involvedObject.name=$1" \
    -o 'jsonpath={range .items[*]}{.source.component}{.reportingComponent} {.reason}: {.message}{"\n"}{end}' |
    grep -i kai
}

say "a claim that asks for 4Gi of the GPU"
kai_claim_pod kai-capacity gpu-4gi
no_capacity() { kai_events kai-capacity | grep -q "DRAConsumableCapacity feature is disabled"; }
eventually "KAI does not allocate it, and says why" no_capacity &&
  say "$(kai_events kai-capacity | grep DRAConsumableCapacity | tail -1 | cut -c1-240)"
[ -z "$(field kai-capacity '{.spec.nodeName}')" ] && ok "kai-capacity stays Pending" ||
  bad "kai-capacity bound to $(field kai-capacity '{.spec.nodeName}')"
k delete pod kai-capacity -n "$test_ns" --wait=false >/dev/null

say "two claims for the GPU whole"
for pod in kai-claim-1 kai-claim-2; do kai_claim_pod "$pod" gpu-whole; done
one_runs() { running kai-claim-1 || running kai-claim-2; }
eventually "KAI binds one of the two and it runs" one_runs || finish
if running kai-claim-1; then first=kai-claim-1 second=kai-claim-2; else first=kai-claim-2 second=kai-claim-1; fi
bound=$(field "$first" '{.spec.nodeName}')
[ "$(k get node "$bound" -o 'jsonpath={.metadata.labels.gvirtus\.io/frontend\.allowed}')" = true ] &&
  ok "$first runs on $bound, a frontend node (the slice's node selector)" || bad "$first runs on $bound"
result=$(allocation "$first")
say "its allocation, by KAI: $result"
want=$(device_endpoint "$(jq -r .pool <<<"$result")" "$(jq -r .device <<<"$result")")
got=$(config_endpoint "$first")
[ -n "$want" ] && [ "$got" = "$want" ] && ok "its properties.json names the GPU's backend $got" ||
  bad "its properties.json names \"$got\", the GPU is at \"$want\""
[ "$(jq -r '.shareID // ""' <<<"$result")" = "" ] &&
  ok "its claim holds the device whole: no shareID (KAI does not honour consumable capacity)" ||
  bad "KAI gave a share: $result"
# KAI looks at every pod it knows in each session: once it has bound a plain pod created
# now, it has looked at the second claim pod again.
test_pod kai-canary '  labels: {kai.scheduler/queue: team-a}' "  schedulerName: kai-scheduler" |
  k apply -f - >/dev/null
canary_bound() { [ -n "$(field kai-canary '{.spec.nodeName}')" ]; }
eventually "KAI binds a plain pod created after both" canary_bound
[ -z "$(field "$second" '{.spec.nodeName}')" ] && [ "$(field "$second" '{.status.phase}')" = Pending ] &&
  ok "$second stays Pending: the GPU went whole to one claim" ||
  bad "$second: $(field "$second" '{.status.phase}') on \"$(field "$second" '{.spec.nodeName}')\""
second_reason() { kai_events "$second" | grep -q Unschedulable; }
eventually "KAI says why (an Event from kai-scheduler)" second_reason &&
  say "$(kai_events "$second" | tail -1 | cut -c1-240)"
finish
