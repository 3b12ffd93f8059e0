#!/usr/bin/env bash
# Binding conditions on real nodes (docs/dra.md, "Binding waits for room"): where the API
# server serves them (Kubernetes 1.36 and later), each published device names the condition
# gpu.gvirtus.io/BackendReady, and kube-scheduler binds a claimant only once the webhook's
# claim binder has set it in the claim's status. With the backends taking one session each
# (--max-sessions=1) and each held by a pod of the label path, a claimant is allocated a
# device but not bound: the binder says so on the claim (WaitingForBackend) and the scheduler
# waits (BindingConditionsPending). Once the pod holding that backend is deleted, the binder
# answers ready and the claimant is bound and runs. The backends and the install are put
# back as they were at the end. On an API server that drops the conditions the scenario
# says so and skips.
# shellcheck source=../../scenarios/lib.sh
source "$(dirname "$0")/../../scenarios/lib.sh"
# shellcheck source=../dra_lib.sh
source "$(dirname "$0")/../dra_lib.sh"
repo=$(cd "$(dirname "$0")/../../../.." && pwd)
frontend=${E2E_FRONTEND_NODE:-fe-a}
node_container "$frontend" >/dev/null || skip "needs the real-node harness (node containers)"
k get deviceclasses.resource.k8s.io >/dev/null 2>&1 || skip "the API server serves no resource.k8s.io/v1"
use_test_namespace
limited=false
restore() {
  dump_on_failure
  k delete namespace "$test_ns" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
  if [ "$limited" = true ]; then
    k patch daemonset gvirtus-backend -n "$system_ns" --type=json -p \
      '[{"op":"test","path":"/spec/template/spec/containers/0/args/0","value":"--max-sessions=1"},
        {"op":"remove","path":"/spec/template/spec/containers/0/args/0"}]' >/dev/null &&
      k rollout status daemonset/gvirtus-backend -n "$system_ns" --timeout=300s >/dev/null ||
      say "could not put the backends back"
  fi
  bash "$repo/tests/e2e/real/dra.sh" off || say "could not put the install back"
}
trap restore EXIT

say "overlays/dra's changes on the running install"
bash "$repo/tests/e2e/real/dra.sh" on && ok "webhook (--dra) and device plugin (--dra) rolled out" ||
  { bad "overlays/dra's changes did not roll out"; finish; }
# Binding conditions are off unless --dra-binding-timeout is set (overlays/dra leaves them
# off): on here, with a timeout the steps below cannot race (dra.sh off puts the arguments
# back).
k patch deployment gvirtus-webhook -n "$system_ns" --type=json -p \
  '[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--dra-binding-timeout=10m"}]' \
  >/dev/null && k rollout status deployment/gvirtus-webhook -n "$system_ns" --timeout=180s >/dev/null &&
  ok "the webhook answers binding conditions, giving a full backend 10 minutes (--dra-binding-timeout=10m)" ||
  { bad "could not set --dra-binding-timeout=10m"; finish; }
# devices_with COUNT SESSIONS: both backends' slices publish COUNT devices of SESSIONS
# sessions each, every one naming the binder's conditions.
devices() {
  k get resourceslices -o json | jq -c '[.items[] | select(.spec.driver == "gpu.gvirtus.io") |
    .spec.devices[] | {sessions: .capacity.sessions.value, ready: .bindingConditions,
    refused: .bindingFailureConditions}] | unique_by(.) | [length, .[0]]'
}
published() { [ "$(k get resourceslices -o json | jq '[.items[] | select(.spec.driver == "gpu.gvirtus.io")] | length')" = 2 ]; }
eventually "both backends' GPUs are published" published || finish
# The new leader rewrites the slices with the conditions, or logs why it cannot (an API server
# that drops them; not the old replicas' "--dra-binding-timeout=0"): whichever comes first
# decides.
served() { [ "$(devices | jq -c '.[1].ready')" = '["gpu.gvirtus.io/BackendReady"]' ]; }
why_not() {
  k logs -n "$system_ns" -l app.kubernetes.io/name=gvirtus-webhook --tail=-1 2>/dev/null |
    grep 'no binding conditions' | grep -v 'dra-binding-timeout=0' | head -1
}
decided() { served || [ -n "$(why_not)" ]; }
eventually "the devices name the binder's conditions, or the webhook says why not" decided || finish
served || skip "the webhook publishes no binding conditions: $(why_not)"
ok "each device names the binder's condition: $(devices | jq -c '.[1] | {ready, refused}')"

say "each backend takes one session, and each is held by a pod of the label path"
k patch daemonset gvirtus-backend -n "$system_ns" --type=json -p \
  '[{"op":"add","path":"/spec/template/spec/containers/0/args/0","value":"--max-sessions=1"}]' >/dev/null &&
  limited=true
k rollout status daemonset/gvirtus-backend -n "$system_ns" --timeout=300s >/dev/null ||
  { bad "the backends did not roll out with --max-sessions=1"; finish; }
one_session() { [ "$(devices | jq -c '[.[0], .[1].sessions]')" = '[1,"1"]' ]; }
eventually "the new backends' slices offer one session each" one_session ||
  { bad "slices: $(devices)"; finish; }
for holder in holder-1 holder-2; do
  test_pod "$holder" '  labels: {gvirtus.io/enabled: "true"}' "  nodeSelector: {kubernetes.io/hostname: $frontend}" |
    k apply -f - >/dev/null
  holds() { [ -n "$(jp pod "$holder" -n "$test_ns" -o 'jsonpath={.metadata.annotations.gvirtus\.io/backend-pod}')" ]; }
  eventually "$holder is given a backend" holds || finish
done
held=$(k get pods -n "$test_ns" -o json | jq -r '[.items[].metadata.annotations["gvirtus.io/backend-pod"]] | unique | length')
[ "$held" = 2 ] && ok "the two holders hold the two backends" || bad "the holders hold $held backends"

say "a claimant is allocated a device but not bound while its backend is full"
claim_template any-gpu | k apply -f - >/dev/null
test_pod claimant '  labels: {gvirtus.io/dra: "true"}' "      resources: {claims: [{name: gpu}]}
  nodeSelector: {kubernetes.io/hostname: $frontend}
  resourceClaims: [{name: gpu, resourceClaimTemplateName: any-gpu}]" | k apply -f - >/dev/null
claim_event() {
  k get events -n "$test_ns" --field-selector "involvedObject.kind=ResourceClaim,reason=$1" -o json |
    jq -r '.items[0].message // empty'
}
waiting() { [ -n "$(claim_event WaitingForBackend)" ]; }
eventually "the binder tells the claim it waits for room" waiting || finish
claim=$(jp pod claimant -n "$test_ns" -o 'jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}')
pool=$(k get resourceclaim "$claim" -n "$test_ns" -o jsonpath='{.status.allocation.devices.results[0].pool}')
ok "WaitingForBackend on $claim: $(claim_event WaitingForBackend)"
pending() {
  k get events -n "$test_ns" --field-selector involvedObject.name=claimant -o json |
    jq -e '[.items[] | select(.reason == "BindingConditionsPending")] | length > 0' >/dev/null
}
eventually "kube-scheduler waits for the claim's binding conditions" pending &&
  ok "kube-scheduler: $(k get events -n "$test_ns" --field-selector involvedObject.name=claimant -o json |
    jq -r '[.items[] | select(.reason == "BindingConditionsPending")][0].message')"
[ -z "$(jp pod claimant -n "$test_ns" -o 'jsonpath={.spec.nodeName}')" ] &&
  ok "the claimant is not bound while $pool is full (its claim allocated there)" ||
  bad "the claimant was bound to a full backend"

say "the holder of that backend goes: the claimant is bound and runs there"
# gvirtus.io/backend-pod names the backend pod as the pool does ("namespace/name").
holder=$(k get pods -n "$test_ns" -o json | jq -r --arg pool "$pool" --arg pod "${pool#*/}" \
  '.items[] | .metadata as $m | select($m.annotations["gvirtus.io/backend-pod"] | . == $pool or . == $pod) | $m.name')
[ -n "$holder" ] || { bad "no holder of $pool"; finish; }
k delete pod "$holder" -n "$test_ns" --wait=false >/dev/null
ready() { [ -n "$(claim_event BackendReady)" ]; }
eventually "the binder answers the claim ready" ready && ok "BackendReady: $(claim_event BackendReady)"
answer=$(k get resourceclaim "$claim" -n "$test_ns" -o json |
  jq -c '[.status.devices[]? | select(.driver == "gpu.gvirtus.io") | .conditions[] | {type, status, reason}]')
[ "$answer" = '[{"type":"gpu.gvirtus.io/BackendReady","status":"True","reason":"RoomForSession"}]' ] &&
  ok "the claim's status says so: $answer" || bad "the claim's status.devices: $answer"
running() { [ "$(jp pod claimant -n "$test_ns" -o 'jsonpath={.status.phase}')" = Running ]; }
eventually "the claimant is bound and runs" running || finish
now_pool=$(k get resourceclaim "$claim" -n "$test_ns" -o jsonpath='{.status.allocation.devices.results[0].pool}')
[ "$now_pool" = "$pool" ] && ok "on the device it waited for ($pool)" ||
  bad "the claim moved from $pool to $now_pool"
finish
